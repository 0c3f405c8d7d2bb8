#!/usr/bin/env bash
# ci/gpu_tier.sh `tests` then `tests-pending` on a stand-in ctest (fake_ctest.py) and nvidia-smi: a run stopped by
# its time limit leaves its unstarted and stopped tests pending, `tests-pending` runs exactly those and the
# property summary covers both runs; a test that fails again stays pending and the step fails; FLASHCHECK_DEADLINE gives
# every ctest step its stop time.
# usage: gpu_tier_pending_test.sh SOURCE_DIR
set -uo pipefail
src=${1:?usage: gpu_tier_pending_test.sh SOURCE_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/repo/ci" "$work/repo/build/gpu" "$work/bin"
cp "$src"/ci/*.sh "$src"/ci/*.py "$work/repo/ci/"
cp "$src/tools/tests/fake_ctest.py" "$work/bin/ctest"
printf '#!/bin/sh\necho 0\n' >"$work/bin/nvidia-smi"
chmod +x "$work/bin/ctest" "$work/bin/nvidia-smi"
export PATH="$work/bin:$PATH" FLASHCHECK_NVIDIA_SMI="$work/bin/nvidia-smi"
fails=0
check() {  # check WHAT CONDITION-EXIT-STATUS
  if [ "$2" -eq 0 ]; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi
}
run() {  # run NAME STEP...: ci/gpu_tier.sh in the copy, logs in $work/NAME
  (cd "$work/repo" && FLASHCHECK_LOGS="$work/$1" OUT="$work/$1.out" FAKE_CTEST_STATE="$work/$1" \
    bash ci/gpu_tier.sh "${@:2}") >"$work/$1.txt" 2>&1
}

run a tests; rc=$?
check "a run with a stopped and an unstarted test fails" $(( rc == 0 ))
grep -q "2 of 4 tests not passed yet" "$work/a.txt"; check "the two are reported pending" $?
run a tests-pending; rc=$?
check "tests-pending passes once they pass" $(( rc != 0 ))
[ "$(sed -n 2p "$work/a.runs")" = "Gpu_Properties.C other.D" ]; check "tests-pending runs exactly the pending tests" $?
grep -q "3 property runs, 200 cases passed, 0 other runs passed (budgeted or fixed cases), 1 skipped, 0 failed or unfinished" \
  "$work/a.txt"; check "the property summary covers both runs" $?
run a tests-pending; rc=$?
grep -q "tests-pending: no test pending" "$work/a.txt"; check "nothing pending after that" $(( rc != 0 || $? != 0 ))

export FAKE_CTEST_FAIL_AGAIN=1
run b tests
run b tests-pending; rc=$?
check "a test that fails again fails tests-pending" $(( rc == 0 ))
grep -q "1 of 4 tests not passed yet" "$work/b.txt"; check "and stays pending" $?
grep -q "Gpu_Properties.C \[properties_gpu\]: FAILED" "$work/b.txt"; check "the summary names it FAILED" $?

unset FAKE_CTEST_FAIL_AGAIN
# FLASHCHECK_DEADLINE stops every ctest step, the sanitizer's too; without it (or FLASHCHECK_TESTS_STOP_AFTER) none stops.
FLASHCHECK_DEADLINE=600 run c sanitizer tests
[ "$(grep -c -- "--stop-time [0-9][0-9]:[0-9][0-9]:[0-9][0-9]" "$work/c.args")" -eq 2 ]
check "FLASHCHECK_DEADLINE gives the sanitizer and the tests steps a stop time" $?
run d sanitizer
grep -q -- "--stop-time" "$work/d.args"; check "no stop time without a deadline" $(( $? == 0 ))
FLASHCHECK_DEADLINE=0 run e sanitizer; rc=$?
[[ $rc -ne 0 && ! -e "$work/e.args" ]] && grep -q "sanitizer: not run, FLASHCHECK_DEADLINE (0 s) has passed" "$work/e.txt"
check "a step after the deadline does not run (ctest would read a past stop time as tomorrow's) and fails the run" $?

echo "$fails failed"
[ "$fails" -eq 0 ]
