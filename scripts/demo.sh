#!/usr/bin/env bash
# The README's first command (make demo): plan, apply and plan again.
set -euo pipefail
cd "$(dirname "$0")/.."
WSU=${WSU:-bin/wsu}
root=$(mktemp -d "${TMPDIR:-/tmp}/wsu-demo.XXXXXX")
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "wsu plan: what would change under $root (nothing is touched)"
"$WSU" plan examples/demo/site.hcl --local -var "root=$root"

say "wsu apply"
"$WSU" apply examples/demo/site.hcl --local -var "root=$root"

say "wsu plan again: the host now matches the playbook"
set +e
"$WSU" plan examples/demo/site.hcl --local -var "root=$root" -detailed-exitcode
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  echo "demo: expected no changes on the second plan (exit 0), got exit $rc" >&2
  exit 1
fi

say "done"
echo "The demo wrote only under $root. Clean up with: rm -rf $root"
