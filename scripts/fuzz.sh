#!/usr/bin/env bash
# Run every fuzz target for the given time each (default 30s): make fuzz FUZZTIME=5m
set -euo pipefail
cd "$(dirname "$0")/.."
time=${1:-30s}
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "== $pkg $target ($time)"
    go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$time"
  done
done
