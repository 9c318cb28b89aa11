#!/usr/bin/env bash
# Run every fuzz target for the given budget each (default 30s): make fuzz FUZZTIME=5m.
# A count (FUZZTIME=5000000x) avoids Go's fuzz-coordinator race at the end
# of a timed run (golang/go#75804: "context deadline exceeded" with no
# failing input, fixed in Go 1.27). A timed run that fails that way without
# writing an input to testdata/fuzz is reported as that race, not a crash.
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-30s}
failed=0
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "== $pkg $target ($budget)"
    corpus="$dir/testdata/fuzz/$target"
    before=$(ls "$corpus" 2>/dev/null | wc -l)
    log=$(mktemp)
    if go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$budget" 2>&1 | tee "$log"; then
      rm -f "$log"; continue
    fi
    after=$(ls "$corpus" 2>/dev/null | wc -l)
    if [ "$after" = "$before" ] && grep -q 'context deadline exceeded' "$log"; then
      echo "-- $target: Go's fuzz-coordinator race at the deadline (golang/go#75804), no failing input; rerun with a count budget, e.g. FUZZTIME=1000000x"
    else
      echo "-- $target FAILED: the failing input is in $corpus"; failed=1
    fi
    rm -f "$log"
  done
done
exit $failed
