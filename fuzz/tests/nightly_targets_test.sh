#!/usr/bin/env bash
# ci/nightly_fuzz.sh's choice of targets (FLASHCHECK_FUZZ_CPU_TARGETS), on stand-in binaries:
#  - a name other than fuzz_model and fuzz_api is a usage error (exit 2, the variable and the name in the message)
#    and writes nothing, not even OUTDIR;
#  - empty with no GPU leaves nothing to fuzz: exit 2 with that reason;
#  - empty with a GPU (CUDA_VISIBLE_DEVICES names one; the stand-in fuzz_kernel needs no device) runs fuzz_kernel
#    alone, as on a GPU machine that was given its binary only: no CPU worker starts, and summary.json lists the
#    kernel target alone with its executions and 0 CPU workers per target.
#   nightly_targets_test.sh SOURCE_DIR WORKDIR
set -uo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  echo "usage: nightly_targets_test.sh SOURCE_DIR WORKDIR"
  exit 0
fi
src=$1 work=$2
rm -rf "$work" && mkdir -p "$work/bin"
fail() { echo "FAIL: $*" >&2; [ -f "$work/nightly.log" ] && tail -20 "$work/nightly.log" >&2; exit 1; }
# A libFuzzer run in miniature: seed line, an INITED and a NEW line, final stats; a merge that succeeds.
cat >"$work/bin/fuzz_kernel" <<'SH'
#!/bin/sh
case "$*" in *-merge=1*) exit 0 ;; esac
echo "INFO: Seed: 1"
printf '#2\tINITED cov: 10 ft: 20 corp: 1/1b exec/s: 0 rss: 30Mb\n#100\tNEW    cov: 12 ft: 25 corp: 2/2b lim: 4 exec/s: 100 rss: 30Mb\n'
echo "stat::number_of_executed_units: 100"
exit 0
SH
# CPU targets that must not run here: they would leave a marker.
for t in fuzz_model fuzz_api; do
  printf '#!/bin/sh\ntouch "%s/%s.ran"\nexit 1\n' "$work" "$t" >"$work/bin/$t"
done
chmod +x "$work"/bin/*
nightly() {  # nightly BUDGET OUTDIR, with the stand-ins and the given environment before it
  env FLASHCHECK_FUZZ_NO_BUILD=1 FLASHCHECK_FUZZ_BUILD="$work/bin" FLASHCHECK_FUZZ_STATUS_SECONDS=0 \
    FLASHCHECK_FUZZ_MERGE_SECONDS=5 "$@" >"$work/nightly.log" 2>&1
}

nightly FLASHCHECK_FUZZ_CPU_TARGETS="fuzz_model fuzz_oracle" CUDA_VISIBLE_DEVICES= \
  bash "$src/ci/nightly_fuzz.sh" 8 "$work/bad"
rc=$?
[ "$rc" -eq 2 ] || fail "an unknown CPU target: exit $rc, not 2"
grep -q "FLASHCHECK_FUZZ_CPU_TARGETS: unknown target 'fuzz_oracle'" "$work/nightly.log" ||
  fail "the message names neither the variable nor the target"
[ ! -e "$work/bad" ] || fail "an unknown CPU target left $work/bad behind"

nightly FLASHCHECK_FUZZ_CPU_TARGETS= CUDA_VISIBLE_DEVICES= bash "$src/ci/nightly_fuzz.sh" 8 "$work/none"
rc=$?
[ "$rc" -eq 2 ] || fail "no GPU and no CPU target: exit $rc, not 2"
grep -q "nothing to fuzz" "$work/nightly.log" || fail "no GPU and no CPU target: the reason is missing"

nightly FLASHCHECK_FUZZ_CPU_TARGETS= CUDA_VISIBLE_DEVICES=0 FLASHCHECK_FUZZ_PROFILES=small \
  FLASHCHECK_FUZZ_KERNEL_WORKERS=1 bash "$src/ci/nightly_fuzz.sh" --gpus 1 8 "$work/out"
rc=$?
[ "$rc" -eq 0 ] || fail "fuzz_kernel alone: exit $rc, not 0"
for t in fuzz_model fuzz_api; do
  [ ! -e "$work/$t.ran" ] || fail "$t ran with FLASHCHECK_FUZZ_CPU_TARGETS empty"
  ! ls "$work/out/logs/$t"-* >/dev/null 2>&1 || fail "$t has worker logs"
done
python3 - "$work/out" <<'PY' || exit 1
import json, sys
doc = json.load(open(f"{sys.argv[1]}/summary.json"))
names = [t["target"] for t in doc["targets"]]
assert names == ["fuzz_kernel:small"], names
assert doc["targets"][0]["executions"] == 100 and doc["targets"][0]["cov"] == 12, doc["targets"][0]
assert doc["cpu_workers_per_target"] == 0, doc["cpu_workers_per_target"]
assert doc["kernel_workers_per_gpu"] == {"small": 1}, doc["kernel_workers_per_gpu"]
print("fuzz_kernel alone:", doc["targets"][0]["executions"], "executions, no CPU target")
PY
echo "PASS: unknown CPU target rejected, nothing to fuzz rejected, fuzz_kernel alone runs alone"
