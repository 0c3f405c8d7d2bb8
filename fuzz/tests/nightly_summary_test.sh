#!/usr/bin/env bash
# ci/nightly_fuzz.sh end to end on the CPU targets of an existing fuzz build, for a few seconds: it must write
# summary.md and a summary.json that follows fuzz/README.md ("Nightly summary JSON") and agrees with the
# Markdown table (executions per target).
#   nightly_summary_test.sh SOURCE_DIR FUZZ_BUILD_DIR WORKDIR [SECONDS]
set -uo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  echo "usage: nightly_summary_test.sh SOURCE_DIR FUZZ_BUILD_DIR WORKDIR [SECONDS]"
  exit 0
fi
src=$1 build=$2 work=$3 seconds=${4:-8}
rm -rf "$work" && mkdir -p "$work"
CUDA_VISIBLE_DEVICES= FLASHCHECK_FUZZ_NO_BUILD=1 FLASHCHECK_FUZZ_BUILD="$build" FLASHCHECK_FUZZ_CPU_WORKERS=1 \
  FLASHCHECK_FUZZ_STATUS_SECONDS=0 bash "$src/ci/nightly_fuzz.sh" --gpus all "$seconds" "$work/out" >"$work/nightly.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  echo "FAIL: nightly_fuzz.sh exited $rc (1: findings, 2: usage or build error); its output:" >&2
  tail -30 "$work/nightly.log" >&2
  exit 1
fi
python3 - "$work/out" <<'PY'
import json, re, sys
out = sys.argv[1]
doc = json.load(open(f"{out}/summary.json"))
md = open(f"{out}/summary.md").read()
assert doc["schema"] == "flashcheck-nightly-fuzz/3", doc["schema"]
assert doc["kernel_workers_per_gpu"] == {} and doc["kernel_oracle_threads"] == 1, doc
assert isinstance(doc["budget_s"], int) and doc["budget_s"] > 0
assert isinstance(doc["commit"], str) and doc["commit"] and f'commit {doc["commit"]}.' in md, doc["commit"]
names = [t["target"] for t in doc["targets"]]
assert names == ["fuzz_model", "fuzz_backward", "fuzz_api", "fuzz_case"], names
for t in doc["targets"]:
    for key, kind in [("workers", int), ("executions", int), ("exec_per_s", (int, float)), ("cov", int), ("ft", int),
                      ("cov_initial", int), ("cov_gain_per_s", (int, float)), ("ft_initial", int),
                      ("ft_gain_per_s", (int, float)), ("new_inputs", int),
                      ("new_inputs_per_s", (int, float)), ("corpus", int), ("findings", int)]:
        assert isinstance(t[key], kind), (t["target"], key, t[key])
    assert t["executions"] > 0 and t["cov"] >= t["cov_initial"] > 0 and t["corpus"] > 0, t
    assert t["corpus_merged"] is True, t
    row = re.search(r"^\| %s \| (\d+) \| (\d+) \|" % t["target"], md, re.M)
    assert row and int(row.group(1)) == t["workers"] and int(row.group(2)) == t["executions"], (t, row)
assert doc["gpu_workers"] == [] and doc["findings"] == [], doc
for f in doc["findings"]:
    assert set(f) == {"target", "file", "kind", "case", "message", "replay"}, f
print("summary.json: " + ", ".join(f'{t["target"]} {t["executions"]} execs, cov {t["cov_initial"]} -> {t["cov"]}'
                                    for t in doc["targets"]))
PY
