#!/usr/bin/env bash
# Development round on a Hopper machine for the wgmma tiles: build the gpu preset's kernel tests and the
# benchmark, run the GPU kernel tests (production and instrumented), then the C++ benchmark sweep. Extra
# arguments go to the configure step (e.g. -DCMAKE_CUDA_FLAGS=... for a variant). Logs under ${OUT:-out}/wgmma.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
out="${OUT:-out}/wgmma"; mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
[ -d .devdeps ] && bash ci/devdeps.sh install >/dev/null 2>&1
build_and_test() {
  cmake --preset gpu "$@" >"$out/configure.log" 2>&1 || { tail -20 "$out/configure.log"; return 2; }
  cmake --build build/gpu -j "$(nproc)" --target kernel_gpu_test kernel_gpu_instrumented_test flashcheck_bench \
    >"$out/build.log" 2>&1 || { grep -E "error" -A3 "$out/build.log" | head -40; return 2; }
  grep -E "spill" "$out/build.log" | sort -u | head -20
  timeout 300 build/gpu/kernel/tests/kernel_gpu_test --gtest_brief=1 >"$out/test.log" 2>&1
  local rc=$?
  tail -30 "$out/test.log"
  return $rc
}
build_and_test "$@" || echo "kernel tests failed (rc=$?)"
timeout 120 build/gpu/kernel/tests/kernel_gpu_instrumented_test --gtest_brief=1 2>&1 | tail -8
timeout 200 build/gpu/bench/flashcheck_bench --grid paper --out "$out/bench.json" >"$out/bench.txt" 2>&1
grep -E "bf16|fp16|f16" "$out/bench.txt" | head -80
