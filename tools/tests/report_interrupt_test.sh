#!/usr/bin/env bash
# ctest tools_report_interrupted (label cpu): flashcheck-report stopped by SIGTERM (as `timeout` stops it) or SIGINT
# (Ctrl-C) finishes the case in progress, prints its tables and an INCOMPLETE summary, writes the JSON of what it
# judged ("complete": false, "interrupted_by", the rest counted in counts.not_run) and exits 128 + the signal;
# tools/subject_table.py marks the subject's rows as stopped.
# usage: report_interrupt_test.sh REPORT SUBJECT_TABLE OUT_DIR
set -uo pipefail
report=$1 subject_table=$2 out=$3
mkdir -p "$out"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
for signal in TERM INT; do
  json="$out/interrupted-$signal.json"
  rm -f "$json" "$out/stdout-$signal" "$out/stderr-$signal"  # a stale progress line would send the signal too early
  # Run in the background of a non-interactive shell, where SIGINT would be ignored unless reset: `trap - INT` in the
  # child's subshell restores its default, so the tool's own handler takes it.
  ( trap - INT; exec "$report" --backend model --random 2000 --json "$json" ) >"$out/stdout-$signal" 2>"$out/stderr-$signal" &
  pid=$!
  for _ in $(seq 1 600); do  # until the first progress line: cases are being judged
    grep -q "cases" "$out/stderr-$signal" 2>/dev/null && break
    sleep 0.1
  done
  kill -s "$signal" "$pid"
  wait "$pid"
  rc=$?
  want=$([ "$signal" = TERM ] && echo 143 || echo 130)
  [[ $rc -eq $want ]] || fail "SIG$signal: exit $rc, expected $want"
  grep -q "^INCOMPLETE (PASS so far): " "$out/stdout-$signal" || fail "SIG$signal: no INCOMPLETE summary line"
  grep -q "stopped by SIG$signal: [0-9]* later cases not run" "$out/stdout-$signal" || fail "SIG$signal: no stop line"
  [[ -f "$json" ]] || { fail "SIG$signal: no JSON written"; continue; }
  python3 - "$json" "$signal" "$want" <<'PY' || failures=$((failures + 1))
import json, sys
doc = json.load(open(sys.argv[1]))
problems = []
if doc.get("complete") is not False: problems.append(f"complete: {doc.get('complete')!r}")
if doc.get("interrupted_by") != "SIG" + sys.argv[2]: problems.append(f"interrupted_by: {doc.get('interrupted_by')!r}")
if doc.get("exit_code") != int(sys.argv[3]): problems.append(f"exit_code: {doc.get('exit_code')!r}")
if not doc["counts"]["not_run"] > 0: problems.append(f"not_run: {doc['counts']['not_run']}")
if len(doc.get("cases", [])) != doc["counts"]["cases"]: problems.append("cases: entries and count differ")
for p in problems: print("FAIL: JSON", p)
sys.exit(1 if problems else 0)
PY
  python3 "$subject_table" "$json" | grep -q "stopped by SIG$signal: [0-9]* cases not run" ||
    fail "SIG$signal: subject_table.py does not mark the rows as stopped"
done
[[ $failures -eq 0 ]] && echo "ok: a stopped report writes what it judged and says it is incomplete"
exit $((failures > 0))
