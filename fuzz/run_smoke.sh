#!/usr/bin/env bash
# Short fuzzing runs of a fuzz target for CTest.
#   run_smoke.sh TARGET SECONDS WORKDIR SEED_DIR DICT   fuzz SECONDS from the checked-in seeds into a scratch
#       corpus under WORKDIR; fail on any crash or finding (artifacts stay in WORKDIR/artifacts)
#   run_smoke.sh --expect-finding ...                   the run must stop on a finding (a planted defect)
#       and leave a finding-*.case that passes without the defect: replayed by $FLASHCHECK_FUZZ_CLEAN_TARGET
#       (the unmutated binary) if set, else by TARGET with FLASHCHECK_FUZZ_MODEL_DEFECT unset; SEED_DIR "-"
#       starts from an empty corpus
#   run_smoke.sh --replay TARGET WORKDIR SEED_DIR        run every seed once (-runs=0); fail on any crash
#   run_smoke.sh --replay-expect-finding TARGET WORKDIR CASE_FILE
#       the case line must be run and judged a finding (a target with a planted defect): proves case lines are
#       checked, not skipped
# A target without its device (fuzz_kernel) exits 0 saying "nothing to fuzz, skipped": the line is echoed for
# CTest's SKIP_REGULAR_EXPRESSION. (libFuzzer exits 77 on a crash, so 77 cannot mean "skipped" here.)
set -uo pipefail
if [ "${1:-}" = "--replay" ] && [ $# -eq 4 ]; then
  target=$2 work=$3 seeds=$4
  rm -rf "$work" && mkdir -p "$work/artifacts"
  "$target" -runs=0 -timeout=60 -artifact_prefix="$work/artifacts/" "$seeds" >"$work/replay.log" 2>&1
  rc=$?
  grep -m1 'nothing to fuzz, skipped' "$work/replay.log" && exit 0
  grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)' "$work/replay.log" | tail -1
  if [ $rc -ne 0 ] || [ -n "$(find "$work/artifacts" -type f)" ]; then
    echo "FAIL: a seed crashed or produced a finding (artifacts in $work/artifacts):" >&2
    for f in "$work"/artifacts/finding-*.case; do [ -f "$f" ] && cat "$f" >&2; done
    grep -vE '^    #|^#[0-9]' "$work/replay.log" | tail -40 >&2
    exit 1
  fi
  exit 0
fi
if [ "${1:-}" = "--replay-expect-finding" ] && [ $# -eq 4 ]; then
  target=$2 work=$3 case_file=$4
  rm -rf "$work" && mkdir -p "$work"
  "$target" -artifact_prefix="$work/" "$case_file" >"$work/replay.log" 2>&1
  rc=$?
  grep -m1 'nothing to fuzz, skipped' "$work/replay.log" && exit 0
  if [ $rc -ne 0 ] && [ -n "$(find "$work" -name 'finding-*.case')" ]; then
    echo "$(basename "$target") judged $(basename "$case_file") a finding (exit $rc), as it must"
    exit 0
  fi
  echo "FAIL: $(basename "$target") exited $rc without a finding on $case_file: the case line was not checked" >&2
  tail -20 "$work/replay.log" >&2
  exit 1
fi
expect_finding=0
if [ "${1:-}" = "--expect-finding" ]; then expect_finding=1; shift; fi
if [ $# -ne 5 ]; then
  echo "usage: $0 [--expect-finding] TARGET SECONDS WORKDIR SEED_DIR DICT | --replay TARGET WORKDIR SEED_DIR" >&2
  exit 2
fi
target=$1 seconds=$2 work=$3 seeds=$4 dict=$5
rm -rf "$work" && mkdir -p "$work/corpus" "$work/artifacts"
[ "$seeds" = "-" ] && seeds="$work/corpus"
log="$work/fuzz.log"
# One process, no forking; rss/timeout limits so a runaway input is a finding rather than a hang
# (FLASHCHECK_FUZZ_TIMEOUT seconds and FLASHCHECK_FUZZ_RSS_MB; fuzz_case holds every input to 1 s).
"$target" -max_total_time="$seconds" -timeout="${FLASHCHECK_FUZZ_TIMEOUT:-30}" \
  -rss_limit_mb="${FLASHCHECK_FUZZ_RSS_MB:-4096}" -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" -dict="$dict" "$work/corpus" "$seeds" >"$log" 2>&1
rc=$?
grep -m1 'nothing to fuzz, skipped' "$log" && exit 0
stats=$(grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added)' "$log" | tr '\n' ' ')
features=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+')
findings=$(find "$work/artifacts" -type f | sort)
echo "$(basename "$target"): exit $rc; ${features:-no feature line}; $stats"
if [ "$expect_finding" -eq 1 ]; then
  case_file=$(find "$work/artifacts" -name 'finding-*.case' | head -1)
  if [ -n "$case_file" ]; then
    echo "finding after $(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#') executions; case line:"
    cat "$case_file"
    # A subject's finding names it, so that its line replays on that subject.
    if [ -n "${FLASHCHECK_SUBJECT:-}" ] && ! grep -q " subject=" "$case_file"; then
      echo "FAIL: the finding on FLASHCHECK_SUBJECT does not name the subject" >&2
      exit 1
    fi
    # It must be the planted defect: the same case passes without it (on a subject: on the healthy one,
    # FLASHCHECK_FUZZ_CLEAN_SUBJECT).
    clean=${FLASHCHECK_FUZZ_CLEAN_TARGET:-$target}
    clean_env=(-u FLASHCHECK_FUZZ_MODEL_DEFECT)
    [ -n "${FLASHCHECK_FUZZ_CLEAN_SUBJECT:-}" ] && clean_env+=("FLASHCHECK_SUBJECT=$FLASHCHECK_FUZZ_CLEAN_SUBJECT")
    if ! env "${clean_env[@]}" "$clean" -artifact_prefix="$work/" "$case_file" >"$work/clean.log" 2>&1; then
      echo "FAIL: the case fails without the planted defect too: a real bug, not the defect" >&2
      grep -vE '^    #|^#[0-9]' "$work/clean.log" | tail -30 >&2
      exit 1
    fi
    exit 0
  fi
  echo "FAIL: the planted defect was not found in ${seconds}s" >&2
  tail -30 "$log" >&2
  exit 1
fi
if [ $rc -ne 0 ] || [ -n "$findings" ]; then
  echo "FAIL: findings or a crash (artifacts in $work/artifacts):" >&2
  # What failed comes first, short enough for a CI summary that shows a log's head and tail: the sanitizer's or
  # libFuzzer's reason, each crash input (a case line where the target reads text) with the command that replays it,
  # and the case lines of the findings; then the log without its stack frames and coverage lines.
  grep -m4 -E 'runtime error:|ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer|LeakSanitizer|libFuzzer)|==flashcheck==|^SUMMARY:' "$log" >&2
  while IFS= read -r f; do
    [ -n "$f" ] || continue
    case "$(basename "$f")" in
      finding-*) ;;
      *) echo "input $(basename "$f"): $(head -c 300 "$f" | tr -c '[:print:]\n' '?')" >&2
         echo "replay: $target $f" >&2 ;;
    esac
  done <<<"$findings"
  for f in "$work"/artifacts/finding-*.case; do [ -f "$f" ] && cat "$f" >&2; done
  grep -vE '^    #|^#[0-9]|NEW_FUNC' "$log" | tail -40 >&2
  exit 1
fi
