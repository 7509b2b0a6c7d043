#!/usr/bin/env bash
# check_run.sh: ctest's check that bench/run.sh works end to end (peak, one op, the report) and
# prints well-formed lines. It asserts nothing about speed: only the shape of the output.
#   bench/check_run.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: check_run.sh BUILD_DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$("$here/run.sh" --quick --parts ops --only '^relu_fwd' --build "$build" 2>&1) || {
  echo "$out"; echo "check_run.sh: bench/run.sh failed"; exit 1; }

fail() { echo "$out"; echo "check_run.sh: $1"; exit 1; }
num='[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?'
for t in 1 2; do
  grep -Eq "^BENCH peak fma/t$t gflops=$num isa=[a-z0-9]+ n=1$" <<<"$out" || fail "no fma/t$t peak line"
  grep -Eq "^BENCH peak copy/t$t gbs=$num n=1$" <<<"$out" || fail "no copy/t$t peak line"
  grep -Eq "^BENCH ops relu_fwd/64x64x24x24/t$t gbs=$num pct_peak=$num ms=$num n=1$" <<<"$out" ||
    fail "no well-formed relu_fwd line for $t threads"
  grep -Eq "^  relu_fwd/64x64x24x24 +$t +$num GB/s" <<<"$out" || fail "no relu_fwd table row for $t threads"
done
# Every raw line has the form the README promises: BENCH part id key=value... n=K
bad=$(grep '^BENCH ' <<<"$out" | grep -Ev "^BENCH [a-z]+ [^ ]+( [a-z_0-9]+=[^ ]+)+ n=[0-9]+$" || true)
[ -z "$bad" ] || fail "malformed raw lines: $bad"
# A wrong option is refused with a usage message, not half a run.
if "$here/run.sh" --parts nosuch --build "$build" >/dev/null 2>&1; then fail "--parts nosuch was accepted"; fi
echo "check_run.sh: ok"
