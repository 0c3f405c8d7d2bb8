#!/usr/bin/env bash
# Nsight Compute profile of one kernel launch inside the C++ benchmark's paper sweep, on a Hopper machine: the
# tree (A, build/gpu) and, given FLAGS, the tree built with those extra compiler flags too (B, build/gpu-ab).
# Builds flashcheck_bench, profiles launch LAUNCH_SKIP of the kernels whose mangled name matches KERNEL_REGEX
# (each point launches twice, warm-up then timed run, so launch 2k + 1 is the timed run of matching point k, from 0),
# and prints each variant's headline metrics and top stall sites (tools/dev/stall_top.py). Writes
# details_{a,b}.txt (speed of light, occupancy, warp states, memory workload) and top_{a,b}.txt to ${OUT:-out}/prof.
#   usage: tools/dev/profile.sh KERNEL_REGEX LAUNCH_SKIP ["-DFLAG[=VALUE] ..."]
#   e.g.   tools/dev/profile.sh 'tensor_core_ws_kernel.*Li256E' 13   # bf16 d = 256 causal N = 512, timed run
set -uo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  sed -n '2,9p' "$0" | cut -c3-
  [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ] && exit 0
  exit 2
fi
cd "$(dirname "$0")/../.."
export PATH=/usr/local/cuda/bin:$PATH
[ -d .devdeps ] && bash ci/devdeps.sh install >/dev/null 2>&1
O=${OUT:-out}/prof; mkdir -p "$O"
variants=a
(cmake --preset gpu >"$O/cfg_a.log" 2>&1 && cmake --build build/gpu -j "$(nproc)" --target flashcheck_bench >"$O/build_a.log" 2>&1) &
if [ $# -eq 3 ]; then
  variants="a b"
  (cmake --preset gpu -B build/gpu-ab -DCMAKE_CUDA_FLAGS="$3" -DCMAKE_CXX_FLAGS="$3" >"$O/cfg_b.log" 2>&1 &&
   cmake --build build/gpu-ab -j "$(nproc)" --target flashcheck_bench >"$O/build_b.log" 2>&1) &
fi
wait
ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu_bin" ] || { echo "ncu not found"; exit 2; }
for v in $variants; do
  dir=build/gpu; [ $v = b ] && dir=build/gpu-ab
  timeout 200 "$ncu_bin" --kernel-name-base mangled --kernel-name "regex:$1" --launch-skip "$2" --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    --section LaunchStats --section Occupancy --section SourceCounters --import-source no -o "/tmp/prof_$v" -f \
    $dir/bench/flashcheck_bench --grid paper --iters 1 --warmup 1 >"$O/ncu_$v.log" 2>&1
  "$ncu_bin" --import "/tmp/prof_$v.ncu-rep" --page details >"$O/details_$v.txt" 2>&1
  "$ncu_bin" --import "/tmp/prof_$v.ncu-rep" --page source --csv --print-source sass >"/tmp/sass_$v.csv" 2>&1
  python3 tools/dev/stall_top.py "/tmp/sass_$v.csv" 40 >"$O/top_$v.txt" 2>&1
  echo "== variant $v"
  grep -E "Duration|DRAM Throughput|Compute \(SM\)|Achieved Occupancy|Registers Per|Issued Warp|Eligible Warps|L1/TEX Hit|L2 Hit|Dynamic Shared" \
    "$O/details_$v.txt" | head -14
  sed -n 3,12p "$O/top_$v.txt" | cut -c1-160
done
