set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
[ -d .devdeps ] && bash ci/devdeps.sh install >/dev/null 2>&1
O=$OUT/prof; mkdir -p $O
(cmake --preset gpu > $O/cfg_a.log 2>&1 && cmake --build build/gpu -j16 --target flashcheck_bench > $O/build_a.log 2>&1) &
(cmake --preset gpu -B build/gpu-ab -DCMAKE_CUDA_FLAGS="-DFLASHCHECK_TC_DEV_OLD_O_STAGING" -DCMAKE_CXX_FLAGS="-DFLASHCHECK_TC_DEV_OLD_O_STAGING" > $O/cfg_b.log 2>&1 && cmake --build build/gpu-ab -j16 --target flashcheck_bench > $O/build_b.log 2>&1) &
wait
ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for v in a b; do
  dir=build/gpu; [ $v = b ] && dir=build/gpu-ab
  timeout 200 $ncu_bin --kernel-name-base mangled --kernel-name "regex:tensor_core_ws_kernel.*Li256E" --launch-skip 13 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
    --section SourceCounters --import-source no -o $O/prof_$v \
    $dir/bench/flashcheck_bench --grid paper --iters 1 --warmup 1 > $O/ncu_$v.log 2>&1
  $ncu_bin --import $O/prof_$v.ncu-rep --page details > $O/details_$v.txt 2>&1
  $ncu_bin --import $O/prof_$v.ncu-rep --page source --csv --print-source sass > $O/sass_$v.csv 2>&1
  grep -E "Duration|Throughput|Eligible|Issued Warp|Stall|Registers|Grid Size|Dynamic Shared|L1/TEX Hit|L2 Hit|DRAM" $O/details_$v.txt | head -40
done
ls -la $O
