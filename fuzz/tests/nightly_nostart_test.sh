#!/usr/bin/env bash
# ci/nightly_fuzz.sh with a target that cannot start (its binary exits 127 with the dynamic loader's message, as a
# clang-built binary does on a machine without libomp) beside one that fuzzes and stops on a finding after a long
# log (exit 1 after "INFO: Seed:" and 100,000 lines, as libFuzzer does) and whose corpus merge hangs: the first must
# be given up at once, not retried until the deadline, and named in the summary with its message, and the night
# must end with exit status 2, not as a night without findings; the second is restarted, never counted as not
# started, and its merge is stopped at FLASHCHECK_FUZZ_MERGE_SECONDS, the corpus reported unmerged. Then a worker
# exiting 79 after it started (fuzz_kernel's device could not draw inputs) is given up at once and listed too.
#   nightly_nostart_test.sh SOURCE_DIR WORKDIR [SECONDS]
set -uo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  echo "usage: nightly_nostart_test.sh SOURCE_DIR WORKDIR [SECONDS]"
  exit 0
fi
src=$1 work=$2 seconds=${3:-12}
rm -rf "$work" && mkdir -p "$work/bin"
printf '#!/bin/sh\necho "fuzz_api: error while loading shared libraries: libomp.so.5: cannot open shared object file" >&2\nexit 127\n' \
  >"$work/bin/fuzz_api"
printf '#!/bin/sh\ncase "$*" in *-merge=1*) exec sleep 60 ;; esac\necho "INFO: Seed: 1"\nseq 100000\nexit 1\n' \
  >"$work/bin/fuzz_model"
chmod +x "$work/bin/fuzz_api" "$work/bin/fuzz_model"
# Workers stop restarting with under 5 s of budget left: SECONDS leaves the long-log target time for several runs.
[ "$seconds" -ge 10 ] || { echo "nightly_nostart_test.sh: SECONDS must be at least 10" >&2; exit 2; }
start=$(date +%s)
CUDA_VISIBLE_DEVICES= FLASHCHECK_FUZZ_MERGE_SECONDS=2 FLASHCHECK_FUZZ_NO_BUILD=1 FLASHCHECK_FUZZ_BUILD="$work/bin" FLASHCHECK_FUZZ_CPU_WORKERS=1 \
  FLASHCHECK_FUZZ_STATUS_SECONDS=0 FLASHCHECK_FUZZ_CPU_TARGETS="fuzz_model fuzz_api" bash "$src/ci/nightly_fuzz.sh" --gpus all "$seconds" "$work/out" >"$work/nightly.log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
fail() { echo "FAIL: $*" >&2; tail -30 "$work/nightly.log" >&2; exit 1; }
[ "$rc" -eq 2 ] || fail "nightly_fuzz.sh exited $rc, not 2"
[ "$elapsed" -lt $((seconds + 20)) ] || fail "took ${elapsed}s: the merge was not stopped at its limit"
[ "$(grep -c '^=== run ' "$work/out/logs/fuzz_api-cpu0.log")" -eq 1 ] || fail "fuzz_api-cpu0 was retried"
[ "$(grep -c '^=== run ' "$work/out/logs/fuzz_model-cpu0.log")" -gt 1 ] || fail "fuzz_model-cpu0 was not restarted"
grep -q '^## Workers that could not fuzz' "$work/out/summary.md" || fail "summary.md names no worker that could not fuzz"
python3 - "$work/out" <<'PY' || exit 1
import json, sys
doc = json.load(open(f"{sys.argv[1]}/summary.json"))
workers = sorted(w["worker"] for w in doc["not_started"])
assert workers == ["fuzz_api-cpu0"], workers
model = next(t for t in doc["targets"] if t["target"] == "fuzz_model")
assert model["corpus_merged"] is False, model
assert open(f"{sys.argv[1]}/logs/fuzz_model.unmerged").read().strip() == "124"
assert all("exit 127" in w["message"] and "libomp.so.5" in w["message"] for w in doc["not_started"]), doc["not_started"]
print("not started: " + "; ".join(f'{w["worker"]}: {w["message"]}' for w in doc["not_started"]))
PY
echo "exit $rc after ${elapsed}s"

# A worker whose device cannot draw a case's inputs (fuzz_kernel's exit 79, after libFuzzer started) is given up at
# once and listed with the workers that could not fuzz, like one that never started.
printf '#!/bin/sh\ncase "$*" in *-merge=1*) exit 0 ;; esac\necho "INFO: Seed: 1"\n%s\nexit 79\n' \
  'echo "fuzz_model: drawing the inputs on the device failed: cudaErrorLaunchFailure" >&2' >"$work/bin/fuzz_model"
CUDA_VISIBLE_DEVICES= FLASHCHECK_FUZZ_MERGE_SECONDS=2 FLASHCHECK_FUZZ_NO_BUILD=1 FLASHCHECK_FUZZ_BUILD="$work/bin" FLASHCHECK_FUZZ_CPU_WORKERS=1 \
  FLASHCHECK_FUZZ_STATUS_SECONDS=0 FLASHCHECK_FUZZ_CPU_TARGETS="fuzz_model fuzz_api" bash "$src/ci/nightly_fuzz.sh" --gpus all 8 "$work/out79" >"$work/nightly79.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "with a worker exiting 79, nightly_fuzz.sh exited $rc, not 2"
[ "$(grep -c '^=== run ' "$work/out79/logs/fuzz_model-cpu0.log")" -eq 1 ] || fail "the worker exiting 79 was retried"
python3 - "$work/out79" <<'PY' || exit 1
import json, sys
doc = json.load(open(f"{sys.argv[1]}/summary.json"))
drawn = [w for w in doc["not_started"] if w["worker"] == "fuzz_model-cpu0"]
assert drawn and "exit 79" in drawn[0]["message"] and "could not draw" not in drawn[0]["message"], doc["not_started"]
assert "drawing the inputs on the device failed" in drawn[0]["message"], drawn
print("could not fuzz: " + drawn[0]["message"])
PY
echo "exit $rc with a worker exiting 79"
