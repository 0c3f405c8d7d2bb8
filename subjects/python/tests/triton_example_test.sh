#!/usr/bin/env bash
# The Triton example under the suite (ctest subject_triton_example, label gpu): subjects/python/triton_attention.py
# through the Python bridge. The healthy kernel passes a case whose last key tile is partial and the report; the planted
# bug (the last key tile's padding joins the softmax) fails that case with a line that names it and replays; fp32
# cases with a dropout (two whose kept weights Triton flushes), one at head_dim 200 and one without keys pass (LEG tools); then the same pair under pytest
# (LEG pytest: pytest_subject_test.sh triton_attention, the long leg: the property tier twice through Triton). ctest runs
# the legs as two tests (subject_triton_example, subject_triton_pytest), so that a time limit that stops the long one
# keeps the other's result. Exit 69 (skipped) without a CUDA device or Triton.
# usage: triton_example_test.sh REPRO REPORT BUILD_DIR PYTHON_DIR [tools|pytest|all]
set -uo pipefail
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../../tests" && pwd)/expect.sh"
repro=$1 report=$2 build=$3 python_dir=$4 leg=${5:-all}
case "$leg" in
  tools|pytest|all) ;;
  *) echo "usage: triton_example_test.sh REPRO REPORT BUILD_DIR PYTHON_DIR [tools|pytest|all]" >&2; exit 2 ;;
esac
export PYTHONPATH="$python_dir${PYTHONPATH:+:$PYTHONPATH}"
python3 -c "import torch, triton; assert torch.cuda.is_available()" 2>/dev/null ||
  { echo "flashcheck-skip: no CUDA device or no Triton here"; exit 69; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failures=0
healthy=python:triton_attention:attention planted=python:triton_attention:attention_tail
line='f16 b=2 hq=4 hkv=2 sq=70 sk=100 d=40 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=3'
# passes WHAT LINE: flashcheck-repro passes LINE on the healthy kernel.
passes() { expect 0 "repro, Triton example$1" -- "$repro" --subject "$healthy" "$2"; }

if [[ "$leg" != pytest ]]; then
  passes "" "$line"
  passes ", window, softcap, sink, bshd with padding" \
    'bf16 b=2 hq=4 hkv=1 sq=90 sk=130 d=64 mask=window-br window=20,5 softcap=30 layout=bshd pad=8 '\
'q=normal(0,2) k=normal(0,2) v=normal(0,1) sink=normal(0,1) seed=4'
  # fp32 with a dropout (the documented mask; the stream offset carries into its high word between heads).
  passes ", dropout" \
    'f32 b=2 hq=4 hkv=2 sq=70 sk=100 d=40 mask=causal-br dropout=0.25 drop_seed=81985529216486895 drop_offset=4294967294 '\
'q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=5'
  # Dropouts that keep only keys of weight below 2^-126: Triton's exp2 flushes them (FTZ) and O is 0 where the
  # reference keeps subnormals; within the bound, and no statistic for the RMS check (docs/error-model.md §6).
  passes ", dropout keeping only subnormal weights" \
    'f32 b=1 hq=1 hkv=1 sq=1 sk=258 d=6 mask=causal-br scale=2 dropout=0.25 drop_seed=247 drop_offset=4294967285 '\
'q=uniform(1,2) k=uniform(-96,-60) v=normal(0,1) seed=118008533'
  passes ", DropoutOffsetChangesOnlyTheMask at 0.99" \
    'f32 b=1 hq=9 hkv=3 sq=195 sk=195 d=1 mask=window-tl window=129,1 dropout=0.99 drop_seed=0 drop_offset=0 '\
'q=uniform(1,2) k=uniform(-160,-100) v=normal(0,1) property=DropoutOffsetChangesOnlyTheMask seed=4'
  # fp32 at d=200 (BLOCK_D 256, one pipeline stage to fit shared memory) and a case without keys (no K and V buffers).
  passes ", fp32 at head_dim 200" \
    'f32 b=2 hq=2 hkv=1 sq=63 sk=31 d=200 mask=none q=normal(0,1) k=normal(0,1) v=uniform(-1,1) seed=99'
  passes ", no keys" \
    'bf16 b=1 hq=2 hkv=2 sq=64 sk=0 d=43 mask=window-br window=0,0 q=uniform(1,2) k=uniform(-96,-60) v=normal(0,0.5) seed=7'
  # A window wider than 2^31 keys (WindowCoveringAllKeysEqualsNoMask draws 1 << 40): unclamped, its offsets reach the
  # kernel as i64 (Triton types a Python int past 2^31 so), where the property's run ended in a CompilationError.
  passes ", window of 2^40 keys" \
    'bf16 b=1 hq=2 hkv=1 sq=70 sk=90 d=32 mask=window-tl window=1099511627776,1099511627776 q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=11'
  expect_finding "$repro" "$planted" "$line" "subject=triton-example-tail seed=3"
  # The sweep runs every head-dim block of every dtype (fp32 at d=256 is the one that must run a shallower pipeline).
  expect 0 "report, Triton example" -- "$report" --subject "$healthy" --random 10 --random-features 10
  grep -q "^PASS" "$out/stdout" || { echo "FAIL: report does not pass"; failures=$((failures + 1)); }
  printf '%s\n' "$line" 'f32 b=1 hq=2 hkv=2 sq=33 sk=65 d=200 mask=causal-br q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=6' \
    >"$out/planted.cases"
  expect 1 "report, planted bug" -- "$report" --subject "$planted" --cases "$out/planted.cases"
fi
if [[ "$leg" != tools ]]; then
  # Each property the planted bug falsifies shrinks for at most this long under pytest.
  export FLASHCHECK_SHRINK_SECONDS=${FLASHCHECK_SHRINK_SECONDS:-10}
  bash "$(dirname "${BASH_SOURCE[0]}")/../../tests/pytest_subject_test.sh" "$build" "$python_dir" triton_attention ||
    failures=$((failures + 1))
fi
exit $((failures > 0))
