#!/usr/bin/env bash
# Nsight Compute profile of one launch of the tensor-core kernel inside the benchmark's paper sweep (run after
# dev/wgmma_round.sh built build/gpu). Usage: profile.sh TILE_REGEX LAUNCH_SKIP NAME, e.g.
#   profile.sh 'Li256ELi128ELi64' 0 d256_n512    # the first d256 launch: bf16 N=512 non-causal (warm-up run)
# Writes ${OUT:-out}/profile/NAME.txt (speed of light, occupancy, warp states, memory workload).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
out="${OUT:-out}/profile"; mkdir -p "$out"
ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu_bin" ] || { echo "ncu not found"; exit 2; }
"$ncu_bin" --kernel-name-base mangled --kernel-name "regex:$1" --launch-skip "$2" --launch-count 1 \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
  --section MemoryWorkloadAnalysis --section LaunchStats \
  build/gpu/bench/flashcheck_bench --grid paper --iters 1 --warmup 1 >"$out/$3.txt" 2>&1
grep -E "Duration|Throughput|Achieved Occupancy|Stall|Issued|Eligible|Registers|Grid Size|Waves|Memory \[%\]|DRAM" "$out/$3.txt" | head -60
