#!/usr/bin/env bash
# Kernels written in Python under the suite (ctest python_subject, label cpu): the Python bridge serves
# subjects/python/naive_attention.py's callables as python:MODULE:FUNCTION, forward, on packed sequences, backward,
# with a dropout and on f8e4m3 inputs.
# flashcheck-repro and flashcheck-report pass the healthy one and fail the planted bug (causal bottom-right computed as top-left) with a case line that
# names it and replays; the property tier passes the healthy one and falsifies the planted one; a module that cannot
# be imported, a function without its declaration and a bad declaration are refused (exit 78) with the reason.
# usage: python_subject_test.sh REPRO REPORT PROPERTIES_MODEL PYTHON_DIR
set -uo pipefail
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/expect.sh"
repro=$1 report=$2 properties=$3
export PYTHONPATH="$4${PYTHONPATH:+:$PYTHONPATH}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cd "$out"  # the modules come from PYTHONPATH, not the working directory
failures=0
healthy=python:naive_attention:attention planted=python:naive_attention:attention_aligned
line='f32 b=1 hq=2 hkv=1 sq=5 sk=9 d=8 mask=causal-br q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=1'

expect 0 "repro, Python subject" -- "$repro" --subject "$healthy" "$line"
expect 0 "repro, Python subject, bshd with padding" -- "$repro" --subject "$healthy" \
  'f32 b=2 hq=4 hkv=2 sq=17 sk=33 d=16 mask=causal-tl layout=bshd pad=3 q=normal(0,2) k=normal(0,2) v=uniform(-1,1) seed=2'
expect_finding "$repro" "$planted" "$line" "subject=python-naive-aligned seed=1"
# Packed sequences with spare key slots, and the backward pass (attention_backward), declared on the function.
expect 0 "repro, Python subject, packed sequences" -- "$repro" --subject "$healthy" \
  'f32 b=3 hq=2 hkv=1 sq=20 sk=40 d=8 mask=causal-br seqs=20:30+10,0:5,7:40 poison=inf q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=1'
expect 0 "repro, Python subject, backward" -- "$repro" --subject "$healthy" \
  'f32 b=2 hq=2 hkv=1 sq=20 sk=40 d=8 mask=causal-tl seqs=20:30+10,7:40 q=normal(0,1) k=normal(0,1) v=normal(0,1) grad=1 dout=normal(0,1) seed=2'
expect 1 "repro, planted bug, backward" -- "$repro" --subject "$planted" \
  'f32 b=2 hq=2 hkv=1 sq=20 sk=40 d=8 mask=causal-br q=normal(0,1) k=normal(0,1) v=normal(0,1) grad=1 dout=normal(0,1) seed=2'
# Dropout with the documented mask (its dump checked by the properties below), forward and backward, packed.
expect 0 "repro, Python subject, dropout" -- "$repro" --subject "$healthy" \
  'f32 b=3 hq=2 hkv=1 sq=20 sk=40 d=8 mask=causal-tl seqs=20:30+10,0:5,7:40 dropout=0.5 drop_seed=5 drop_offset=18446744073709551610 q=normal(0,1) k=normal(0,1) v=normal(0,1) grad=1 dout=normal(0,1) seed=1'
# A row of one dominant key (scores of 10^8) whose kept key's dS the reference cancels exactly: the subject's P,
# recomputed in double from the fp32 LSE, is off by e^+-4 and its D carries O's fp32 rounding (docs/error-model.md 10.7).
expect 0 "repro, Python subject, dropout backward on a row of one dominant key" -- "$repro" --subject "$healthy" \
  'f32 b=1 hq=1 hkv=1 sq=3 sk=31 d=1 mask=causal-br dropout=0.9 drop_seed=93 drop_offset=40 q=nearmax(0.25) k=normal(0,1e-30) v=normal(0,1) grad=1 dout=dominant(0.1,10) seed=2'
# e4m3 inputs with descales (fc_subject_fp8_v1 through the bridge: the bytes, the descales, O as bf16's bits).
expect 0 "repro, Python subject, f8e4m3 with descales" -- "$repro" --subject "$healthy" \
  'f8e4m3 b=2 hq=4 hkv=2 sq=9 sk=40 d=16 mask=causal-br layout=bshd pad=2 q=normal(0,2) k=normal(0,2) v=uniform(-1,1) descale=uniform(0.5,2) seed=3'
expect 1 "repro, planted bug, f8e4m3" -- "$repro" --subject "$planted" "${line/f32/f8e4m3}"
expect 3 "repro, outside the declaration (f16)" -- "$repro" --subject "$healthy" "${line/f32/f16}"
expect 0 "report, Python subject" -- "$report" --subject "$healthy" --random 2 --random-features 0 --random-sequences 0 --random-dv 0
grep -q "^PASS" "$out/stdout" || { echo "FAIL: report does not pass"; failures=$((failures + 1)); }

FLASHCHECK_SUBJECT=$healthy FLASHCHECK_CASES=10 expect 0 "properties, Python subject" -- "$properties"
grep -q "\[  PASSED  \] 44 tests" "$out/stdout" || { echo "FAIL: not 44 properties passed"; grep -E "PASSED|FAILED" "$out/stdout"; failures=$((failures + 1)); }
FLASHCHECK_SUBJECT=$planted FLASHCHECK_CASES=30 FLASHCHECK_SHRINK_SECONDS=5 expect 1 "properties, planted bug" -- \
  "$properties" --gtest_filter='*OracleAgreement'
grep -q "FALSIFIED.*subject=python-naive-aligned" "$out/stdout" ||
  { echo "FAIL: the planted bug is not falsified with its case line"; failures=$((failures + 1)); }

# Refused with the reason (exit 78, EX_CONFIG): no module, no declaration, a declaration the bridge cannot read.
cat > "$out/broken_subject.py" <<'PY'
import naive_attention

def bare(problem, buffers):
    pass

def bad(problem, buffers):
    pass

bad.flashcheck = {"name": "x", "dtypes": ["f64"], "masks": ["none"], "layouts": ["bhsd"], "head_dim": [1, 8]}

def typo(problem, buffers):
    pass

typo.flashcheck = dict(naive_attention.attention.flashcheck, limit={"seqlen_k_max": 8})

KEPT = []

def keeps(problem, buffers):
    naive_attention.attention(problem, buffers)
    KEPT.append(buffers["o"])

keeps.flashcheck = {k: v for k, v in naive_attention.attention.flashcheck.items()
                   if k not in ("backward", "dropout")}  # forward only

def declines(problem, buffers):  # a backward that declines every case its declaration let through (as SDPA's may)
    raise NotImplementedError("this backward declines the case")

declines_backward_decl = dict(naive_attention.attention.flashcheck, name="declines-backward",
                              backward=dict(naive_attention.attention.flashcheck["backward"], function="declines"))
declines_backward_decl.pop("dropout")

def declines_backward(problem, buffers):
    naive_attention.attention(problem, buffers)

declines_backward.flashcheck = declines_backward_decl

def bshd_only(problem, buffers):  # FlashAttention's varlen layout and nothing else: packed rows are contiguous bshd
    naive_attention.attention(problem, buffers)

bshd_only.flashcheck = dict(keeps.flashcheck, name="bshd-only", layouts=["bshd"])

def zero_fp8_tile(problem, buffers):  # a key tile of 0 keys: the loader names the entry
    naive_attention.attention(problem, buffers)

zero_fp8_tile.flashcheck = dict(keeps.flashcheck, fp8={"arithmetic": "tensor-core-fp8", "key_tiles": {16: 0}})
PY
export PYTHONPATH="$out:$PYTHONPATH"
expect 78 "repro, no such module" -- "$repro" --subject python:no_such_module:f "$line"
grep -q "cannot import no_such_module" "$out/stderr" || { echo "FAIL: the import error is not named"; failures=$((failures + 1)); }
# A Python installation that does not start: the subject cannot be loaded (78, named), not CPython's fatal exit (1).
expect 78 "repro, CPython does not start" -- env PYTHONHOME=/nonexistent "$repro" --subject "$healthy" "$line"
grep -q "CPython does not start" "$out/stderr" || { echo "FAIL: the start failure is not named"; failures=$((failures + 1)); }
expect 78 "repro, no declaration" -- "$repro" --subject python:broken_subject:bare "$line"
grep -q "no \`flashcheck\` declaration" "$out/stderr" || { echo "FAIL: the missing declaration is not named"; failures=$((failures + 1)); }
expect 78 "repro, bad declaration" -- "$repro" --subject python:broken_subject:bad "$line"
grep -q "dtypes: unknown name 'f64'" "$out/stderr" || { echo "FAIL: the bad dtype is not named"; cat "$out/stderr"; failures=$((failures + 1)); }
expect 78 "repro, a declaration key misspelt" -- "$repro" --subject python:broken_subject:typo "$line"
grep -q "unknown key 'limit'" "$out/stderr" || { echo "FAIL: the misspelt key is not named"; cat "$out/stderr"; failures=$((failures + 1)); }
expect 78 "repro, an fp8 key tile of 0" -- "$repro" --subject python:broken_subject:zero_fp8_tile "$line"
grep -q "fp8.key_tiles\[0\].key_tile: > 0 (got 0)" "$out/stderr" ||
  { echo "FAIL: the bad fp8 key tile is not named"; cat "$out/stderr"; failures=$((failures + 1)); }
# Packed sequences on a subject that declares the contiguous bshd layout alone: run, not refused for their strides.
expect 0 "repro, packed sequences on a bshd-only subject" -- "$repro" --subject python:broken_subject:bshd_only \
  'f32 b=2 hq=2 hkv=1 sq=20 sk=40 d=8 mask=causal-br layout=bshd seqs=20:30+10,7:40 q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=3'
expect 3 "repro, dense bhsd on a bshd-only subject" -- "$repro" --subject python:broken_subject:bshd_only "$line"
# A backward that declines its cases: counted as unsupported in the report's backward section, not as failures.
expect 0 "report, a backward that declines" -- "$report" --subject python:broken_subject:declines_backward --random 0 \
  --random-features 0 --random-sequences 0 --random-dv 0 --random-dropout 0 --backward 1
grep -q "^backward: 0 of 1 grad=1 cases failed (counted in the failures above), 1 unsupported" "$out/stdout" ||
  { echo "FAIL: the declined backward cases are not counted as unsupported"; grep "^backward" "$out/stdout"; failures=$((failures + 1)); }
# A subject that keeps a view past the call (it would alias memory the harness frees) fails naming the buffer.
expect 1 "repro, a view kept past the call" -- "$repro" --subject python:broken_subject:keeps "$line"
grep -q "kept a reference to o past the call" "$out/stdout" ||
  { echo "FAIL: the kept view is not named"; tail -5 "$out/stdout"; failures=$((failures + 1)); }
exit $((failures > 0))
