#!/usr/bin/env bash
# ctest subject_example_planted_bug (label gpu): the example subject with the README's one-line bug (O's rescale
# dropped) fails a case whose running max moves across K/V tiles; its case line names the subject and replays to
# the same failure. Exit 69 (skipped) without a CUDA device.
# usage: planted_bug_test.sh REPRO PLANTED_SUBJECT
set -uo pipefail
repro=$1 planted=$2
line='f16 b=1 hq=2 hkv=1 sq=30 sk=200 d=33 mask=none scale=10 q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=0'
out=$("$repro" --subject "$planted" "$line")
rc=$?
[[ $rc -eq 69 ]] && exit 69
echo "$out"
[[ $rc -eq 1 ]] || { echo "FAIL: expected exit 1 (the planted bug caught), got $rc"; exit 1; }
finding=$(sed -n 's/^case: //p' <<<"$out" | head -1)
[[ "$finding" == *"subject=example-missing-rescale seed=0" ]] || { echo "FAIL: case line without the subject: $finding"; exit 1; }
"$repro" --subject "$planted" "$finding" >/dev/null
[[ $? -eq 1 ]] || { echo "FAIL: the finding's case line does not replay to FAIL"; exit 1; }
echo "ok: the planted bug is caught and its case line replays"
