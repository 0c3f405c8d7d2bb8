# A/B round: persistent plan (build/gpu) vs one item per CTA (build/gpu-ab), bench only for B.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
OUTD=$OUT/ab; mkdir -p $OUTD
OUT=$OUT bash kernel/src/tensor_core/dev/wgmma_round.sh > $OUTD/round_a.txt 2>&1
tail -3 $OUT/wgmma/test.log
cmake --preset gpu -B build/gpu-ab -DCMAKE_CUDA_FLAGS=-DFLASHCHECK_TC_DEV_ONE_ITEM_PER_CTA > $OUTD/cfg_b.log 2>&1
cmake --build build/gpu-ab -j16 --target flashcheck_bench > $OUTD/build_b.log 2>&1 || tail -20 $OUTD/build_b.log
build/gpu-ab/bench/flashcheck_bench --grid paper --out $OUTD/bench_b.json > $OUTD/bench_b.txt 2>&1
python3 - <<'PY'
import json,os
o=os.environ['OUT']
a=json.load(open(o+'/wgmma/bench.json')); b=json.load(open(o+'/ab/bench_b.json'))
pa=a['results']
pb=b['results']
for x,y in zip(pa,pb):
    k=' '.join(str(x.get(f)) for f in ('dtype','head_dim','seqlen','mask','heads'))
    print(k, 'persist %.1f  one-per-item %.1f  ratio %.3f'%(x['tflops'],y['tflops'],x['tflops']/y['tflops']))
PY
