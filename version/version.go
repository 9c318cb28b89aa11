// Package version holds the build's version, stamped by the Makefile.
package version

// Version is set with -ldflags "-X github.com/wsu-project/wsu/version.Version=...".
var Version = "0.1.0-dev"
