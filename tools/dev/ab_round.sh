#!/usr/bin/env bash
# A/B round on a Hopper machine, in one call: the current tree (A, build/gpu) against one or more variants (B, C,
# ...), each built with the gpu preset; every variant's kernel tests (kernel_gpu_test); every variant's C++
# benchmark sweep (bench/flashcheck_bench, FlashAttention-paper grid) in a process of its own, one after the
# other; then X/A per point and the geometric mean, each variant's spill lines from ptxas, and any wgmma
# serialization ptxas reported (C75xx warnings: see docs/design/tensor-core-kernel.md).
#   usage: tools/dev/ab_round.sh VARIANT [VARIANT ...]       (OUT=dir, default ./out; results in $OUT/ab)
# A VARIANT is either
#   "-DFLAG[=VALUE] ..."   extra flags for the host and device compilers (tile shapes are read by host code too)
#   @FILE.tar              another revision's files laid over a copy of the tree (path from the repository
#                          root), made with e.g. git archive -o ab_base.tar REV kernel/src
#   ""                     A again: a drift control (sequential sweeps of one call move a point by up to 10%)
# AB_BENCH=decode: the decode family instead, built without the tensor-core and split-TF32 families:
# kernel_gpu_test and kernel_gpu_sequences_test per variant, then bench/decode_bench.py --quick --only decode
# --flashcheck-only on each variant's libflashcheck.so, and X/A of flashcheck's bandwidth per point and layout.
set -uo pipefail
if [ $# -eq 0 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  sed -n '2,15p' "$0" | cut -c3-
  exit $(( $# == 0 ? 2 : 0 ))
fi
cd "$(dirname "$0")/../.."
export PATH=/usr/local/cuda/bin:$PATH
OUT=${OUT:-$PWD/out}; export OUT
OUTD=$OUT/ab; mkdir -p "$OUTD"
[ -d .devdeps ] && bash ci/devdeps.sh install >/dev/null 2>&1
AB_BENCH=${AB_BENCH:-dense}
case $AB_BENCH in
  dense) targets="--target flashcheck_bench kernel_gpu_test"; families=""; adir=build/gpu ;;
  decode) targets="--target flashcheck_shared kernel_gpu_test kernel_gpu_sequences_test"
          # The decode family alone (and the general one, always built): a quarter of the compile, so four variants
          # fit one call; the prefill cases of the tests run on the general family.
          # A builds in a folder of its own, so build/gpu keeps every family.
          families="-DFLASHCHECK_KERNEL_FAMILIES=decode"; adir=build/gpu-decode ;;
  *) echo "AB_BENCH must be dense or decode (got $AB_BENCH)" >&2; exit 2 ;;
esac
jobs=$(( $(nproc) / ($# + 1) + 1 ))
(cmake --preset gpu $families -B $adir > $OUTD/cfg_a.log 2>&1 && cmake --build $adir -j $jobs $targets > $OUTD/build_a.log 2>&1) &
i=0
for flags in "$@"; do
  i=$((i + 1))
  # The flags go to host and device code alike: tile shapes are read by select_config() (host) and the kernels.
  if [[ $flags == @* ]]; then
    src=build/ab-src$i; rm -rf $src; mkdir -p $src
    tar cf - --exclude=./build --exclude=./.gpubin --exclude=./.git . | tar xf - -C $src && tar xf "${flags#@}" -C $src
    (cd $src && cmake --preset gpu $families -B $adir > $OUTD/cfg_$i.log 2>&1 && cmake --build $adir -j $jobs $targets > $OUTD/build_$i.log 2>&1 &&
     rm -rf ../../build/gpu-ab$i && ln -s "$PWD/$adir" ../../build/gpu-ab$i) &
  else
    (cmake --preset gpu $families -B build/gpu-ab$i -DCMAKE_CUDA_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" > $OUTD/cfg_$i.log 2>&1 &&
     cmake --build build/gpu-ab$i -j $jobs $targets > $OUTD/build_$i.log 2>&1) &
  fi
done
wait
variants="a $(seq -s ' ' 1 $#)"
for v in $variants; do
  dir=$adir; [ $v != a ] && dir=build/gpu-ab$v
  grep -h "spill" $OUTD/build_$v.log | grep -v instrumented | sed -E 's/.*(Li(64|128|256)ELi[0-9]+ELi[0-9]+E).*(OStagingE[0-9]).*,( [0-9]+ bytes spill stores)/\1 \3\4/' | sort -u | head -8
  timeout 300 $dir/kernel/tests/kernel_gpu_test --gtest_brief=1 > $OUTD/test_$v.log 2>&1
  echo "variant $v kernel_gpu_test (rc $?): $(tail -1 $OUTD/test_$v.log)"; grep -A8 "Failure" $OUTD/test_$v.log | head -30
  if [ $AB_BENCH = decode ]; then
    timeout 300 $dir/kernel/tests/kernel_gpu_sequences_test --gtest_brief=1 > $OUTD/seqtest_$v.log 2>&1
    echo "variant $v kernel_gpu_sequences_test (rc $?): $(tail -1 $OUTD/seqtest_$v.log)"
    grep -A8 "Failure" $OUTD/seqtest_$v.log | head -30
  fi
done
for v in $variants; do
  dir=$adir; [ $v != a ] && dir=build/gpu-ab$v
  if [ $AB_BENCH = decode ]; then
    timeout 400 python3 bench/decode_bench.py --quick --only decode --flashcheck-only --lib $dir/bench/libflashcheck.so --out $OUTD/decode_$v \
      > $OUTD/decode_$v.txt 2>&1 || echo "variant $v decode_bench failed: $(tail -3 $OUTD/decode_$v.txt)"
  else
    timeout 150 $dir/bench/flashcheck_bench --grid paper --out $OUTD/bench_$v.json > $OUTD/bench_$v.txt 2>&1
  fi
done
AB_BENCH=$AB_BENCH python3 - $variants <<'PY'
import json, math, os, sys
o = os.environ['OUT'] + '/ab'
vs = sys.argv[1:]
def points(v):
    """(point, figure) of variant v: TFLOP/s per grid point, or flashcheck's TB/s per decode point and layout."""
    if os.environ['AB_BENCH'] == 'dense':
        for x in json.load(open(f'{o}/bench_{v}.json'))['results']:
            yield ' '.join(str(x.get(f)) for f in ('dtype', 'head_dim', 'seqlen', 'mask', 'heads')), x['tflops']
        return
    for x in json.load(open(f'{o}/decode_{v}/decode.json'))['decode']:
        for name, tbps in x['tbps'].items():
            if name.startswith('flashcheck'):
                yield f"{x['heads_q']}/{x['heads_kv']} {x['batch']} {x['cache']} {name.removeprefix('flashcheck ')}", tbps
res = {v: list(points(v)) for v in vs}
print('point'.ljust(44), 'A'.rjust(7), *[f'{v}/A'.rjust(7) for v in vs[1:]])
logs = {v: [] for v in vs[1:]}
for i, (key, base) in enumerate(res['a']):
    row = []
    for v in vs[1:]:
        r = res[v][i][1] / base
        logs[v].append(math.log(r))
        row.append(f'{r:7.3f}')
    print(key.ljust(44), f'{base:7.2f}', *row)
print('geomean'.ljust(52), *[f'{math.exp(sum(l) / len(l)):7.3f}' for l in logs.values()])
PY
for v in $variants; do echo "variant $v kernel_gpu_test: $(tail -1 $OUTD/test_$v.log)"; done
grep -h "C75[0-9][0-9]" $OUTD/build_*.log | sort -u | cut -c1-160
