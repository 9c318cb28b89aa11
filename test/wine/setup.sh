#!/bin/sh
# Prepares the Wine test tier: installs wine, wine64 and the MinGW compiler
# when missing (as root; otherwise fails with the command to run), builds the
# stand-in bcryptprimitives.dll and the template WINEPREFIX in the cache.
# Idempotent; the tests do the same on demand.
set -eu
cd "$(dirname "$0")/../.."
exec go run ./test/wine/winesetup "$@"
