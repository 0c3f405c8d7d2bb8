#!/usr/bin/env bash
# The GPU tier in one call on a Hopper machine (the lent H100 or a GPU CI runner): build the `gpu` preset,
# run ctest -L gpu (properties, kernel tests, regression findings), the sanitizer tier, and optionally the
# fuzz kernel target and the benchmark. Logs go to $OUT (default ./out). Steps are chosen by arguments:
#   ci/gpu_tier.sh build tests report sanitizer fuzz=SECONDS bench
# Without network: RapidCheck comes from .devdeps (ci/devdeps.sh pack, here) when it is not installed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"
LOGS="${FLASHCHECK_LOGS:-/tmp/flashcheck-gpu-tier}"  # everything; $OUT gets summary.txt + logs.tar.gz
mkdir -p "$OUT" "$LOGS"
export PATH="/usr/local/cuda/bin:$PATH"
jobs="$(nproc)"
status=0
log() { echo "== $(date +%T) $*" | tee -a "$LOGS/summary.txt"; }
finish() { cp "$LOGS/summary.txt" "$OUT/" 2>/dev/null; tar czf "$OUT/logs.tar.gz" -C "$LOGS" . 2>/dev/null; }
trap finish EXIT

for step in "$@"; do
  case "$step" in
    build)
      [ -d .devdeps ] && bash ci/devdeps.sh install
      log "build (gpu preset, $jobs jobs)"
      { cmake --preset gpu && cmake --build --preset gpu -j "$jobs"; } >"$LOGS/build.log" 2>&1 \
        || { log "BUILD FAILED"; tail -50 "$LOGS/build.log"; exit 1; }
      grep -E "registers|spill" "$LOGS/build.log" | sort -u >"$LOGS/ptxas.txt" || true ;;
    tests)
      log "ctest -L gpu"
      ctest --preset gpu --output-on-failure -j "${FLASHCHECK_CTEST_JOBS:-6}" >"$LOGS/ctest_gpu.log" 2>&1 || status=1
      tail -25 "$LOGS/ctest_gpu.log" | tee -a "$LOGS/summary.txt" ;;
    report)
      log "verification report on the GPU kernel (flashcheck-report)"
      build/gpu/tools/flashcheck-report --backend gpu >"$LOGS/report.txt" 2>&1 || status=1
      tail -22 "$LOGS/report.txt" | tee -a "$LOGS/summary.txt" ;;
    sanitizer)
      log "ctest -L sanitizer"
      ctest --preset sanitizer --output-on-failure >"$LOGS/ctest_sanitizer.log" 2>&1 || status=1
      tail -15 "$LOGS/ctest_sanitizer.log" | tee -a "$LOGS/summary.txt" ;;
    fuzz=*)
      secs="${step#fuzz=}"
      log "nightly fuzz for ${secs}s"
      bash ci/nightly_fuzz.sh "$secs" "$LOGS/fuzz" >"$LOGS/fuzz.log" 2>&1 || status=1
      tail -30 "$LOGS/fuzz.log" | tee -a "$LOGS/summary.txt" ;;
    bench)
      log "bench"
      bash bench/run_bench.sh build/gpu "$LOGS/bench" >"$LOGS/bench.log" 2>&1 || status=1
      tail -40 "$LOGS/bench.log" | tee -a "$LOGS/summary.txt" ;;
    *) echo "unknown step '$step'" >&2; exit 2 ;;
  esac
done
log "gpu tier exit status $status"
exit "$status"
