#!/usr/bin/env bash
# Nsight Compute A/B of one kernel launch on a Hopper machine, in one call: the tree (A, build/gpu) and the tree
# built with extra compiler flags (B, build/gpu-ab), each profiled on launch LAUNCH_SKIP of the kernels matching
# KERNEL_REGEX inside the C++ benchmark's paper sweep (each point launches twice: warm-up, timed run). Prints
# speed of light, warp states and the top stall sites (tools/dev/stall_top.py) of both; writes details_{a,b}.txt
# and top_{a,b}.txt to ${OUT:-out}/prof.
#   usage: tools/dev/profile_ab.sh "-DFLAG[=VALUE] ..." KERNEL_REGEX LAUNCH_SKIP
#   e.g.   tools/dev/profile_ab.sh "-DMY_SWITCH" 'tensor_core_ws_kernel.*Li256E' 13   # bf16 d = 256 causal N = 512
set -uo pipefail
if [ $# -ne 3 ]; then
  sed -n '2,8p' "$0" | cut -c3-
  [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ] && exit 0
  exit 2
fi
cd "$(dirname "$0")/../.."
export PATH=/usr/local/cuda/bin:$PATH
[ -d .devdeps ] && bash ci/devdeps.sh install >/dev/null 2>&1
O=${OUT:-out}/prof; mkdir -p $O
(cmake --preset gpu > $O/cfg_a.log 2>&1 && cmake --build build/gpu -j8 --target flashcheck_bench > $O/build_a.log 2>&1) &
(cmake --preset gpu -B build/gpu-ab -DCMAKE_CUDA_FLAGS="$1" -DCMAKE_CXX_FLAGS="$1" > $O/cfg_b.log 2>&1 &&
 cmake --build build/gpu-ab -j8 --target flashcheck_bench > $O/build_b.log 2>&1) &
wait
ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu_bin" ] || { echo "ncu not found"; exit 2; }
for v in a b; do
  dir=build/gpu; [ $v = b ] && dir=build/gpu-ab
  timeout 200 "$ncu_bin" --kernel-name-base mangled --kernel-name "regex:$2" --launch-skip "$3" --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    --section LaunchStats --section Occupancy --section SourceCounters --import-source no -o /tmp/prof_$v \
    $dir/bench/flashcheck_bench --grid paper --iters 1 --warmup 1 > $O/ncu_$v.log 2>&1
  "$ncu_bin" --import /tmp/prof_$v.ncu-rep --page details > $O/details_$v.txt 2>&1
  "$ncu_bin" --import /tmp/prof_$v.ncu-rep --page source --csv --print-source sass > /tmp/sass_$v.csv 2>&1
  python3 tools/dev/stall_top.py /tmp/sass_$v.csv 40 > $O/top_$v.txt 2>&1
  echo "== variant $v"
  grep -E "Duration|DRAM Throughput|Compute \(SM\)|Issued Warp|Eligible Warps|L1/TEX Hit|L2 Hit|Dynamic Shared" $O/details_$v.txt | head -12
  sed -n 3,12p $O/top_$v.txt | cut -c1-160
done
