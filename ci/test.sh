#!/usr/bin/env bash
# The README's test command (the CPU tier; also what .ci/run runs): installs what is missing, then
#   1. preset `ci`: builds everything host-side and runs ctest (labels cpu and gpu; with no device the gpu
#      tests report as skipped with their reason);
#   2. preset `fuzz-cpu`: builds the CPU fuzz targets with clang, ASan and UBSan and runs their smoke tests.
# Each ctest writes JUnit XML to build/<preset>/ctest-junit.xml; skipped tests are listed with their reasons.
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
if [ $# -gt 0 ]; then
  echo "ci/test.sh: takes no arguments (got '$1'); settings come from the environment (--help lists them)" >&2
  exit 64
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
# JUnit XML in the build directory for CI dashboards. CTest's summary names skipped tests without their reason
# (only -V shows a test's output): ci/skip_reasons.py reads the reasons back from the XML and lists them.
junit="$PWD/build/$preset/ctest-junit.xml"
ctest_status=0
ctest --preset "$preset" --output-junit "$junit" || ctest_status=$?
python3 ci/skip_reasons.py "$junit" || true
elapsed "ctest ($preset)"
[ "$ctest_status" -eq 0 ] || exit "$ctest_status"

if [ "${FLASHCHECK_SKIP_FUZZ_SMOKE:-0}" != 1 ]; then
  cmake --preset fuzz-cpu >/dev/null
  cmake --build --preset fuzz-cpu -j "$jobs"
  elapsed "build (fuzz-cpu)"
  ctest --preset fuzz-cpu --output-junit "$PWD/build/fuzz-cpu/ctest-junit.xml"
  elapsed "ctest (fuzz-cpu)"
fi
