#!/usr/bin/env bash
# The README's test command (the CPU tier; also what .ci/run runs): installs what is missing, then
#   1. preset `ci`: builds everything host-side and runs ctest (labels cpu and gpu; with no device the gpu
#      tests report as skipped with their reason);
#   2. preset `fuzz-cpu`: builds the CPU fuzz targets with clang, ASan and UBSan and runs their smoke tests.
# The CUDA kernels are compiled and run in the GPU tier (ci/gpu_tier.sh), not here: see README.
# On a GPU machine, FLASHCHECK_PRESET=gpu runs step 1 with the kernels built and the gpu tests run.
set -euo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  cat <<'USAGE'
usage: bash ci/test.sh
  The CPU tier: installs what is missing (ci/deps.sh), builds preset ci and runs ctest (labels cpu and gpu; gpu
  tests skip with their reason without a device), then builds preset fuzz-cpu and runs its fuzz smoke tests.
  Prints the skipped tests with their reasons; JUnit XML lands in build/<preset>/ctest-junit.xml.
environment:
  FLASHCHECK_PRESET=gpu          build the kernels and run every label (on a GPU machine)
  FLASHCHECK_SKIP_FUZZ_SMOKE=1   skip the fuzz-cpu step
USAGE
  exit 0
fi
cd "$(dirname "$0")/.."
bash ci/deps.sh
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
preset="${FLASHCHECK_PRESET:-ci}"
jobs="$(nproc)"
start=$(date +%s)
elapsed() { echo "flashcheck: $1 after $(( $(date +%s) - start )) s"; }

cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$jobs"
elapsed "build ($preset)"
ctest --preset "$preset"
elapsed "ctest ($preset)"

if [ "${FLASHCHECK_SKIP_FUZZ_SMOKE:-0}" != 1 ]; then
  cmake --preset fuzz-cpu >/dev/null
  cmake --build --preset fuzz-cpu -j "$jobs"
  elapsed "build (fuzz-cpu)"
  ctest --preset fuzz-cpu
  elapsed "ctest (fuzz-cpu)"
fi
