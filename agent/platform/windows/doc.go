// Package windows is the node agent's Windows backend: host.Host on Win32
// (files, processes, the Service Control Manager, the registry, the machine
// environment and HNS). The Win32 parts build only for GOOS=windows; the
// pure-Go helpers (command-line quoting, registry key and PATH parsing) build
// everywhere so their unit tests run on Linux too. CI runs the Win32 parts
// under Wine (see wine_test.go).
package windows
