#!/usr/bin/env bash
# The README's main job: installs what is missing, builds, and prints the verification report
# (flashcheck-report: the tile-boundary sweep plus seeded random cases for every dtype, judged against the
# exact oracle and the error model) on the GPU kernel when a CUDA device is present, else on the host model.
# Extra arguments go to flashcheck-report (e.g. --random 500, --backend model, --cases FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/deps.sh
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
# With a GPU and nvcc, build the kernels (preset gpu) and report on them; otherwise the host model (preset ci).
default_preset=ci
if command -v nvcc >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then default_preset=gpu; fi
preset="${FLASHCHECK_PRESET:-$default_preset}"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)" --target flashcheck-report
"build/$preset/tools/flashcheck-report" "$@"
