#!/usr/bin/env bash
# Builds the standalone dev harness tc_dev (all tensor-core TUs + config.cpp + dispatch.cu) into ${1:-build/tc}.
# Run from the repository root. JOBS (default 2) TUs compile in parallel; prints ptxas resources per TU.
set -euo pipefail
out=${1:-build/tc}
jobs=${JOBS:-2}
src=kernel/src/tensor_core
mkdir -p "$out"
flags=(-O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a -I kernel/include -DFLASHCHECK_HAS_CUDA=1 ${EXTRA_FLAGS:-})
ls $src/*.cu $src/dev/tc_dev.cu | xargs -P "$jobs" -I{} sh -c \
  'n=$(basename {} .cu); /usr/bin/time -f "$n: %es" nvcc '"${flags[*]}"' -Xptxas -v -c {} -o '"$out"'/$n.o 2>&1 | grep -E "error|warning|spill|registers|: [0-9.]+s$" | sed "s/^/$n: /"'
g++ -O2 -std=c++20 -I kernel/include -c $src/config.cpp -o "$out"/config.o
nvcc "${flags[@]}" "$out"/*.o -o "$out"/tc_dev
echo "built $out/tc_dev"
