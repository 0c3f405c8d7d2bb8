#!/usr/bin/env bash
# The README's main job: installs what is missing, builds, and prints the verification report
# (flashcheck-report: the tile-boundary sweep plus seeded random cases for every dtype, judged against the
# exact oracle and the error model) on the GPU kernel when a CUDA device is present, else on the host model.
# Extra arguments go to flashcheck-report (e.g. --random 500, --backend model, --cases FILE). It also builds the tools
# the README's next steps name (flashcheck-repro, flashcheck-fuzz-decode, the property binaries), so that a failing
# case line replays at once.
set -euo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  cat <<'USAGE'
usage: bash ci/verify.sh [flashcheck-report options]
  Installs what is missing, builds flashcheck-report and the tools the README names (flashcheck-repro,
  flashcheck-fuzz-decode, properties_model; preset gpu with a GPU and nvcc, else ci) and prints the verification
  report; exits with the report's status (README, "Exit codes").
  Options go to flashcheck-report: --random N, --random-features N, --seed S, --backend gpu|model,
  --cases FILE, --json PATH, --verbose (build/<preset>/tools/flashcheck-report --help lists them).
environment:
  FLASHCHECK_PRESET=ci|gpu   choose the build
USAGE
  exit 0
fi
cd "$(dirname "$0")/.."
bash ci/deps.sh
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
# With a GPU and nvcc, build the kernels (preset gpu) and report on them; otherwise the host model (preset ci).
default_preset=ci
if command -v nvcc >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then default_preset=gpu; fi
preset="${FLASHCHECK_PRESET:-$default_preset}"
cmake --preset "$preset" >/dev/null
targets=(flashcheck-report flashcheck-repro flashcheck-fuzz-decode properties_model)
[ "$preset" = gpu ] && targets+=(properties_gpu)
cmake --build --preset "$preset" -j "$(nproc)" --target "${targets[@]}"
"build/$preset/tools/flashcheck-report" "$@"
