#!/usr/bin/env bash
# ci/nightly_fuzz.sh with targets that cannot start (their binaries exit 127 with the dynamic loader's message, as
# clang-built binaries do on a machine without libomp): each worker must give up at once rather than retry until
# the deadline, the summary must name every such worker with the message, and the night must end with exit status
# 2, not as a night without findings.
#   nightly_nostart_test.sh SOURCE_DIR WORKDIR [SECONDS]
set -uo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  echo "usage: nightly_nostart_test.sh SOURCE_DIR WORKDIR [SECONDS]"
  exit 0
fi
src=$1 work=$2 seconds=${3:-20}
rm -rf "$work" && mkdir -p "$work/bin"
for t in fuzz_model fuzz_api; do
  printf '#!/bin/sh\necho "%s: error while loading shared libraries: libomp.so.5: cannot open shared object file" >&2\nexit 127\n' \
    "$t" >"$work/bin/$t"
  chmod +x "$work/bin/$t"
done
start=$(date +%s)
CUDA_VISIBLE_DEVICES= FLASHCHECK_FUZZ_NO_BUILD=1 FLASHCHECK_FUZZ_BUILD="$work/bin" FLASHCHECK_FUZZ_CPU_WORKERS=1 \
  FLASHCHECK_FUZZ_STATUS_SECONDS=0 bash "$src/ci/nightly_fuzz.sh" --gpus all "$seconds" "$work/out" >"$work/nightly.log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
fail() { echo "FAIL: $*" >&2; tail -30 "$work/nightly.log" >&2; exit 1; }
[ "$rc" -eq 2 ] || fail "nightly_fuzz.sh exited $rc, not 2"
[ "$elapsed" -lt "$seconds" ] || fail "took ${elapsed}s of a ${seconds}s budget: the workers retried"
grep -q '^## Workers that did not start' "$work/out/summary.md" || fail "summary.md names no worker that did not start"
python3 - "$work/out" <<'PY' || exit 1
import json, sys
doc = json.load(open(f"{sys.argv[1]}/summary.json"))
workers = sorted(w["worker"] for w in doc["not_started"])
assert workers == ["fuzz_api-cpu0", "fuzz_model-cpu0"], workers
assert all("exit 127" in w["message"] and "libomp.so.5" in w["message"] for w in doc["not_started"]), doc["not_started"]
print("not started: " + "; ".join(f'{w["worker"]}: {w["message"]}' for w in doc["not_started"]))
PY
echo "exit $rc after ${elapsed}s"
