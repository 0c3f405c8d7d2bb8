#!/usr/bin/env bash
# Nsight Compute profile of one launch of a flashcheck kernel inside the C++ benchmark's paper sweep, using the
# gpu preset's build (cmake --preset gpu && cmake --build --preset gpu --target flashcheck_bench).
#   usage: tools/dev/profile.sh KERNEL_REGEX LAUNCH_SKIP NAME
#   e.g.   tools/dev/profile.sh 'tensor_core_ws_kernel.*Li256E' 1 d256_n512   # bf16 d = 256 N = 512, timed run
# Each point of the sweep launches twice (warm-up, timed run), so launch 2k + 1 is the k-th matching point's
# timed run. Writes ${OUT:-out}/profile/NAME.txt (speed of light, occupancy, warp states, memory workload) and
# prints its summary.
set -uo pipefail
if [ $# -ne 3 ]; then
  sed -n '2,8p' "$0" | cut -c3-
  [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ] && exit 0
  exit 2
fi
cd "$(dirname "$0")/../.."
out="${OUT:-out}/profile"; mkdir -p "$out"
ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu_bin" ] || { echo "ncu not found"; exit 2; }
"$ncu_bin" --kernel-name-base mangled --kernel-name "regex:$1" --launch-skip "$2" --launch-count 1 \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
  --section MemoryWorkloadAnalysis --section LaunchStats \
  build/gpu/bench/flashcheck_bench --grid paper --iters 1 --warmup 1 >"$out/$3.txt" 2>&1
grep -E "Duration|Throughput|Achieved Occupancy|Stall|Issued|Eligible|Registers|Grid Size|Waves|Memory \[%\]|DRAM" "$out/$3.txt" | head -60
