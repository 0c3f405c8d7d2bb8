#!/usr/bin/env bash
# Development only: builds split_tf32_dev (the split-TF32 family alone, plus an instrumented copy) with nvcc
# and runs it. Usage: run_dev.sh build [OUT_DIR] | run [test|time] | all. The binary lands in build/b2/dev.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
export PATH="/usr/local/cuda/bin:$PATH"
bin=${DEV_BIN:-build/b2/dev/split_tf32_dev}
case "${1:-all}" in
  build|all)
    mkdir -p "$(dirname "$bin")"
    nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -lineinfo \
      -Xptxas=-warn-spills -Ikernel/include -Ikernel/src -DFLASHCHECK_HAS_CUDA=1 -DFLASHCHECK_TC_WGMMA=1 ${EXTRA_FLAGS:-} \
      kernel/src/split_tf32/dev/split_tf32_dev.cu kernel/src/split_tf32/dev/instrumented.cu \
      kernel/src/split_tf32/*.cu kernel/src/split_tf32/config.cpp -o "$bin" ;;&
  run|all) "$bin" "${2:-}" ;;
esac
