#!/usr/bin/env bash
# The README's test command: installs what is missing, configures the `ci` preset, builds, runs ctest
# (labels cpu and gpu; GPU tests skip with a reason when no device is present).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/deps.sh
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
preset="${FLASHCHECK_PRESET:-ci}"
start=$(date +%s)
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
echo "flashcheck: build took $(( $(date +%s) - start )) s"
ctest --preset "$preset"
echo "flashcheck: build and tests took $(( $(date +%s) - start )) s"
