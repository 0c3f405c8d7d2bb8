#!/usr/bin/env bash
# FLASHCHECK_SHARD in a property binary (the CPU tier's, on the host model): two shards of a 9-case run check
# 5 + 4 cases from different seeds, a shard run twice gives the same coverage table (the same cases), 0/1
# with FLASHCHECK_SEED is the plain run with that seed, and a malformed shard or seed fails every property.
#   shard_test.sh PROPERTIES_BINARY
set -euo pipefail
bin=$1
filter='--gtest_filter=*.OutputWithinValueRange'
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
run() { env -u RC_PARAMS FLASHCHECK_CASES=9 "$@" "$bin" "$filter" 2>&1; }

run FLASHCHECK_SHARD=0/2 FLASHCHECK_SEED=7 >"$work/s0" || { cat "$work/s0"; fail "shard 0/2"; }
run FLASHCHECK_SHARD=1/2 FLASHCHECK_SEED=7 >"$work/s1" || { cat "$work/s1"; fail "shard 1/2"; }
grep -q "OK, passed 5 tests" "$work/s0" || { cat "$work/s0"; fail "shard 0/2 should check 5 of 9 cases"; }
grep -q "OK, passed 4 tests" "$work/s1" || { cat "$work/s1"; fail "shard 1/2 should check 4 of 9 cases"; }
grep -q "SHARD    \] 0/2: cases \[0, 5) of 9" "$work/s0" || fail "shard 0/2 does not print its plan"
grep -q "SHARD    \] 1/2: cases \[5, 9) of 9" "$work/s1" || fail "shard 1/2 does not print its plan"
seed0=$(grep -oE "RapidCheck seed [0-9]+" "$work/s0")
seed1=$(grep -oE "RapidCheck seed [0-9]+" "$work/s1")
[ "$seed0" != "$seed1" ] || fail "both shards draw from $seed0"

# Deterministic: the same shard checks the same cases (its coverage table, case by case, is the same).
run FLASHCHECK_SHARD=1/2 FLASHCHECK_SEED=7 >"$work/s1b"
diff <(grep -A30 "COVERAGE" "$work/s1" | grep -vE "[0-9]+ ms") <(grep -A30 "COVERAGE" "$work/s1b" | grep -vE "[0-9]+ ms") ||
  fail "shard 1/2 run twice checked different cases"

# 0/1 is the unsharded run with the base seed.
run FLASHCHECK_SHARD=0/1 FLASHCHECK_SEED=7 >"$work/one"
env FLASHCHECK_CASES=9 RC_PARAMS="seed=7" "$bin" "$filter" >"$work/plain" 2>&1
diff <(grep -A30 "COVERAGE" "$work/one" | grep -vE "[0-9]+ ms") <(grep -A30 "COVERAGE" "$work/plain" | grep -vE "[0-9]+ ms") ||
  fail "shard 0/1 differs from the plain run with seed=7"

# RC_PARAMS' max_success is the case count, as FLASHCHECK_CASES is, and combines with FLASHCHECK_SEED.
env -u FLASHCHECK_CASES RC_PARAMS="max_success=3" FLASHCHECK_SEED=7 "$bin" "$filter" >"$work/rc" 2>&1 ||
  { cat "$work/rc"; fail "RC_PARAMS=max_success=3 with FLASHCHECK_SEED"; }
grep -q "OK, passed 3 tests" "$work/rc" || { cat "$work/rc"; fail "RC_PARAMS=max_success=3 with FLASHCHECK_SEED ran other than 3 cases"; }

for bad in "FLASHCHECK_SHARD=2/2" "FLASHCHECK_SHARD=1" "FLASHCHECK_SEED=x"; do
  if run "$bad" >"$work/bad"; then fail "$bad accepted"; fi
  grep -q "${bad%%=*}" "$work/bad" || { cat "$work/bad"; fail "$bad: the failure does not name the variable"; }
done
echo "PASS: shards 0/2 + 1/2 = 9 cases from two seeds, deterministic; 0/1 = the plain run; bad values fail"
