#!/usr/bin/env bash
# The tools on subjects (ctest subject_tools, label cpu): flashcheck-repro and flashcheck-report with --subject
# exit 0 on the healthy host-model subject, 1 on the planted defect (its case line names the subject and replays
# to the same failure), 3 outside the capabilities, 78 on a malformed library, 64 when a line names another
# subject, and the same on a packed, paged sequence case (fc_subject_sequences_v1), on a grad=1 case
# (fc_subject_backward_v1) and on a dropout case (fc_subject_dropout_v1); tools/subject_table.py builds the subject x
# dtype table from their JSON.
# usage: subject_tools_test.sh REPRO REPORT HOST_MODEL MISSING_RESCALE RESTRICTED MALFORMED_VERSION SUBJECT_TABLE
#                               BAD_GRADIENT DROPOUT_OFFSET_32BIT
set -uo pipefail
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/expect.sh"
repro=$1 report=$2 healthy=$3 defective=$4 restricted=$5 malformed=$6 subject_table=$7 bad_gradient=$8 bad_dropout=$9
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failures=0
line='f32 b=1 hq=2 hkv=1 sq=30 sk=200 d=33 mask=none scale=10 q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=0'

expect 0 "repro, healthy subject" -- "$repro" --subject "$healthy" "$line"
expect_finding "$repro" "$defective" "$line" "subject=host-model-missing-rescale seed=0"
expect 64 "repro, the finding's line on another subject" -- "$repro" --subject "$healthy" "$finding"
expect 64 "repro, the finding's line without --subject" -- "$repro" "$finding"
expect 3 "repro, outside the capabilities" -- "$repro" --subject "$restricted" "$line"
grep -q "UNSUPPORTED (dtype: f32 not among f16 (subject host-model-restricted))" "$out/stdout" ||
  { echo "FAIL: no UNSUPPORTED verdict naming the dtype"; failures=$((failures + 1)); }
expect 78 "repro, malformed subject" -- "$repro" --subject "$malformed" "$line"
grep -q "ABI version 99" "$out/stderr" || { echo "FAIL: the version error is not named"; failures=$((failures + 1)); }
# Sequences (fc_subject_sequences_v1): packed sequences over a paged cache on the subjects that declare them.
seqline='f32 b=2 hq=2 hkv=1 sq=30 sk=200 d=33 mask=none seqs=30:200,7:150 page=16 scale=10 q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=0'
expect 0 "repro, healthy subject, sequences" -- "$repro" --subject "$healthy" "$seqline"
expect 1 "repro, planted defect, sequences" -- "$repro" --subject "$defective" "$seqline"
seqfinding=$(sed -n 's/^case: //p' "$out/stdout" | head -1)
expect 1 "repro, the sequence finding's line replays" -- "$repro" --subject "$defective" "$seqfinding"
# The backward pass (fc_subject_backward_v1): a grad=1 line on the healthy subject, on a planted backward defect (its
# forward healthy), and on a subject that declares none.
gradline='bf16 b=2 hq=4 hkv=2 sq=40 sk=70 d=64 mask=causal-br softcap=20 q=normal(0,1) k=normal(0,1) v=normal(0,1) sink=normal(0,1) grad=1 dout=normal(0,1) seed=3'
expect 0 "repro, healthy subject, backward" -- "$repro" --subject "$healthy" "$gradline"
expect 1 "repro, planted backward defect" -- "$repro" --subject "$bad_gradient" "$gradline"
grep -q "^forward: PASS" "$out/stdout" || { echo "FAIL: the backward defect's forward does not pass"; failures=$((failures + 1)); }
expect 3 "repro, backward on a subject without one" -- "$repro" --subject "$restricted" "${gradline/bf16/f16}"
expect 0 "report, backward section on the healthy subject" -- "$report" --subject "$healthy" --random 0 --random-features 0 --random-sequences 0 --random-dv 0 --backward 2 --random-dropout 2
grep -q "^backward: 0 of 9 grad=1 cases failed" "$out/stdout" || { echo "FAIL: no backward section on the subject"; failures=$((failures + 1)); }
# Dropout (fc_subject_dropout_v1): a grad=1 dropout line whose stream offset has high bits, on the healthy subject, on
# the planted offset truncation (found, named, replayed), and on a subject that declares no dropout.
dropline='bf16 b=2 hq=4 hkv=2 sq=40 sk=70 d=64 mask=causal-br softcap=20 dropout=0.25 drop_seed=77 drop_offset=4294967300 q=normal(0,1) k=normal(0,1) v=normal(0,1) sink=normal(0,1) grad=1 dout=normal(0,1) seed=3'
expect 0 "repro, healthy subject, dropout" -- "$repro" --subject "$healthy" "$dropline"
expect_finding "$repro" "$bad_dropout" "$dropline" "subject=host-model-dropout-offset-32bit seed=3"
expect 3 "repro, dropout on a subject without one" -- "$repro" --subject "$restricted" "${dropline/bf16/f16}"
expect 78 "repro, missing library" -- "$repro" --subject "$out/none.so" "$line"
expect 64 "repro, --subject with --backend" -- "$repro" --subject "$healthy" --backend model "$line"

expect 0 "report, restricted subject (its part of the sweep)" -- "$report" --subject "$restricted" --random 3 --random-features 3
grep -q "sweep cases moved inside its capabilities" "$out/stdout" ||
  { echo "FAIL: report does not say what it left out"; failures=$((failures + 1)); }
printf '%s\n' "$line" > "$out/cases"
expect 3 "report --cases, a line outside the capabilities" -- "$report" --subject "$restricted" --cases "$out/cases"
expect 1 "report --cases, planted defect" -- "$report" --subject "$defective" --cases "$out/cases"
expect 78 "report, malformed subject" -- "$report" --subject "$malformed"

# The subject x dtype table: the restricted subject (f16 only) and the planted defect on the same lines.
narrow=${line/d=33/d=16}  # inside the restricted subject's capabilities (d 8..32, no GQA, causal-br)
narrow=${narrow/hkv=1/hkv=2}; narrow=${narrow/mask=none/mask=causal-br}
printf '%s\n' "${narrow/f32/f16}" "${narrow/f32/bf16}" "$seqline" >> "$out/cases"
# The f16 line runs and passes, the others lie outside the capabilities: a pass within them, not "nothing ran".
expect 0 "report --json, restricted subject" -- "$report" --subject "$restricted" --cases "$out/cases" --json "$out/r.json"
grep -q "^PASS within capabilities: 0 of 4 cases failed, 0 rejected, 3 unsupported" "$out/stdout" ||
  { echo "FAIL: report does not say it passed within the capabilities"; failures=$((failures + 1)); }
expect 1 "report --json, planted defect" -- "$report" --subject "$defective" --cases "$out/cases" --json "$out/d.json"
expect 0 "subject_table.py" -- python3 "$subject_table" "$out/r.json" "$out/d.json" --known "host-model-missing-rescale=planted"
cp "$out/stdout" "$out/table"
for row in '| host-model-restricted | f32 | 0 | 2 | 0 | 0 / 0 | - | 0 / 0 | - | - | not run |' '|  | f16 | 1 | 0 | 0 | 0 / 0 | - |' \
           '| host-model-missing-rescale | f32 | 2 | 0 | 2 | 1 / 1 | - |' '- **host-model-missing-rescale**: planted'; do
  grep -qF -- "$row" "$out/table" || { echo "FAIL: the table has no row '$row'"; cat "$out/table"; failures=$((failures + 1)); }
done
expect 65 "subject_table.py, not a report" -- python3 "$subject_table" "$out/cases"
expect 2 "subject_table.py, --properties without NAME=" -- python3 "$subject_table" "$out/r.json" --properties x
exit $((failures > 0))
