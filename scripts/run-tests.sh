#!/usr/bin/env bash
# Runs the unit tests under AddressSanitizer and UndefinedBehaviorSanitizer,
# then every test (unit and integration) in the optimized build, and prints
# the tests that skipped (each with its reason: a missing optional package,
# or a CPU without a kernel variant's instructions), then one closing line
# "N passed, N failed, N skipped" over both.
set -u
cd "$(dirname "$0")/.."
export INCOLL_TEST_BINDIR="$PWD/build/bin"
export INCOLL_TEST_PROGDIR="$PWD/build/tests"
total_pass=0
total_fail=0
total_skip=0
skips=$(mktemp)
trap 'rm -f "$skips"' EXIT
run() {
  local label=$1; shift
  echo "== $label"
  local out rc
  out=$(mktemp)
  "$@" 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  local line
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
  grep -E '^SKIP ' "$out" | sed "s/^/  ($label) /" >>"$skips"
  rm -f "$out"
  if [ -z "$line" ]; then
    echo "FAIL $label: runner ended without a summary (exit $rc)"
    total_fail=$((total_fail + 1))
    return
  fi
  local p f s
  p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')
  f=$(echo "$line" | sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/')
  s=$(echo "$line" | sed -nE 's/.* ([0-9]+) skipped.*/\1/p')
  total_pass=$((total_pass + p))
  total_fail=$((total_fail + f))
  total_skip=$((total_skip + ${s:-0}))
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL $label: runner exited $rc"
    total_fail=$((total_fail + 1))
  fi
}
# The tests run two at a time (INCOLL_TEST_JOBS overrides): the unit
# tests, then the integration tests that mostly wait (on timeouts,
# restarts, retransmissions: the families tests/runner.c names in
# shared_families); the other integration tests (MPI jobs, benchmarks, the
# simulator, wake-up counts) always run one at a time.
jobs=${INCOLL_TEST_JOBS:-2}
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run "unit tests under ASan+UBSan" build/tests/incoll-tests-asan --unit -j "$jobs"
run "all tests" build/tests/incoll-tests -j "$jobs"
if [ -s "$skips" ]; then
  echo "== skipped"
  cat "$skips"
fi
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
