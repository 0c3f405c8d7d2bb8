#!/usr/bin/env bash
# The benchmark in one call on a GPU machine with PyTorch: builds flashcheck_bench and libflashcheck.so in
# BUILD_DIR (configuring a bench-only Release build there if it has none), runs the C++ sweep and the
# side-by-side script, and leaves 8 files in OUT_DIR: bench_cpp.json, bench_cpp.txt, side_by_side.json,
# side_by_side.md, tflops_bf16.png, tflops_fp16.png, tflops_fp32.png, memory.png. About 1.5 minutes on an H100
# after the build.
#   bash bench/run_bench.sh BUILD_DIR OUT_DIR [--quick]
# FLASHCHECK_BENCH_PREBUILT=1 skips the build and uses BUILD_DIR/bench/{flashcheck_bench,libflashcheck.so}.
set -euo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  sed -n '2,8p' "$0" | cut -c3-
  echo "usage: bench/run_bench.sh BUILD_DIR OUT_DIR [--quick]"
  exit 0
fi
if [ $# -lt 2 ]; then
  echo "usage: bench/run_bench.sh BUILD_DIR OUT_DIR [--quick]" >&2
  exit 2
fi
cd "$(dirname "$0")/.."
build="$1"
out="$2"
quick="${3:-}"
export PATH="/usr/local/cuda/bin:$PATH"
mkdir -p "$out"
start=$(date +%s)
if [ "${FLASHCHECK_BENCH_PREBUILT:-0}" != 1 ]; then
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
      -DFLASHCHECK_TESTS=OFF -DFLASHCHECK_BENCH=ON >/dev/null
  fi
  cmake --build "$build" -j "$(nproc)" --target flashcheck_bench flashcheck_shared
  echo "run_bench: build took $(( $(date +%s) - start )) s"
fi

grid=paper
[ "$quick" = "--quick" ] && grid=quick
"$build/bench/flashcheck_bench" --grid "$grid" --out "$out/bench_cpp.json" | tee "$out/bench_cpp.txt"
echo "run_bench: C++ sweep done at $(( $(date +%s) - start )) s"
PYTHONUNBUFFERED=1 python3 bench/side_by_side.py --lib "$build/bench/libflashcheck.so" --out "$out" $quick
echo "run_bench: done in $(( $(date +%s) - start )) s"
