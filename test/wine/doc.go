// Package winetest runs the Windows build of wsu under Wine for tests: it
// installs Wine when it is missing (as root), builds the stand-in
// bcryptprimitives.dll Go binaries need on Wine 8.0, keeps a template
// WINEPREFIX in a cache keyed by the Wine version, and gives each test its
// own copy with a persistent wineserver. See windows-on-wine.md for why each
// step is there. Linux only; setup.sh prepares the same cache for CI.
package winetest
