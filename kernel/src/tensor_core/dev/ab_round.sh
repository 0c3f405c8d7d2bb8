#!/usr/bin/env bash
# A/B round on a Hopper machine, one call: the current tree (build/gpu, A) against the same tree configured with
# extra CUDA flags (build/gpu-ab, B), both kernel test suites, both benchmark sweeps in one process each, then
# B/A per point, the test summaries, and any wgmma serialization ptxas reported (C75xx). Used with the
# development switches: -DFLASHCHECK_TC_DEV_ONE_ITEM_PER_CTA (persistent CTAs off), -DFLASHCHECK_TC_DEV_NO_WS
# (the cp.async kernel everywhere);
# NOTES.md records what each round measured.   usage: OUT=dir ab_round.sh "-DFLAG[=VALUE] ..."
set -uo pipefail
cd "$(dirname "$0")/../../../.."
export PATH=/usr/local/cuda/bin:$PATH
OUTD=$OUT/ab; mkdir -p $OUTD
[ -d .devdeps ] && bash ci/devdeps.sh install >/dev/null 2>&1
(cmake --preset gpu > $OUTD/cfg_a.log 2>&1 && cmake --build build/gpu -j16 --target flashcheck_bench kernel_gpu_test > $OUTD/build_a.log 2>&1) &
# The flags go to host and device code alike: tile shapes are read by select_config() (host) and the kernels.
(cmake --preset gpu -B build/gpu-ab -DCMAKE_CUDA_FLAGS="$1" -DCMAKE_CXX_FLAGS="$1" > $OUTD/cfg_b.log 2>&1 &&
 cmake --build build/gpu-ab -j16 --target flashcheck_bench kernel_gpu_test > $OUTD/build_b.log 2>&1) &
wait
grep -h "spill" $OUTD/build_b.log | grep -v instrumented | sort -u | cut -c1-300 | head -8
# Both must be correct before their speed means anything.
for v in a b; do
  dir=build/gpu; [ $v = b ] && dir=build/gpu-ab
  timeout 300 $dir/kernel/tests/kernel_gpu_test --gtest_brief=1 > $OUTD/test_$v.log 2>&1
  echo "variant ${v^^} kernel_gpu_test (rc $?): $(tail -1 $OUTD/test_$v.log)"; grep -A8 "Failure" $OUTD/test_$v.log | head -30
done
timeout 150 build/gpu/bench/flashcheck_bench --grid paper --out $OUTD/bench_a.json > $OUTD/bench_a.txt 2>&1
timeout 150 build/gpu-ab/bench/flashcheck_bench --grid paper --out $OUTD/bench_b.json > $OUTD/bench_b.txt 2>&1
python3 - <<'PY'
import json,os
o=os.environ['OUT']+'/ab'
a=json.load(open(o+'/bench_a.json'))['results']; b=json.load(open(o+'/bench_b.json'))['results']
for x,y in zip(a,b):
    k=' '.join(str(x.get(f)) for f in ('dtype','head_dim','seqlen','mask','heads'))
    print(k, 'A %.1f  B %.1f  B/A %.3f'%(x['tflops'],y['tflops'],y['tflops']/x['tflops']))
PY
for v in a b; do echo "variant ${v^^} kernel_gpu_test: $(tail -1 $OUTD/test_$v.log)"; done
grep -h "C75[0-9][0-9]" $OUTD/build_a.log $OUTD/build_b.log | sort -u | cut -c1-160
