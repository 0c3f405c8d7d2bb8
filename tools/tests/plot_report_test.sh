#!/usr/bin/env bash
# tools/plot_report.py on a small report (flashcheck-report --backend model --cases tools/tests/plot.cases --json):
#   table  the points it reads (one per judged case; the rejected line left out) and its exit codes for a file
#          that is missing (66) or not a report (65); needs no matplotlib
#   plots  the three plots are written (PNG); without matplotlib the test is skipped with that reason
#   plot_report_test.sh table|plots SOURCE_DIR REPORT_BINARY WORKDIR
set -uo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  echo "usage: plot_report_test.sh table|plots SOURCE_DIR REPORT_BINARY WORKDIR"
  exit 0
fi
mode=$1 src=$2 report=$3 work=$4
script="$src/tools/plot_report.py"
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }
if [ "$mode" = plots ] && ! python3 -c "import matplotlib" 2>/dev/null; then
  echo "matplotlib not installed: plot_report.py plots skipped (Debian: python3-matplotlib)"
  exit 0
fi
"$report" --backend model --cases "$src/tools/tests/plot.cases" --json "$work/report.json" >"$work/report.log" 2>&1
[ $? -eq 2 ] || fail "flashcheck-report should exit 2 (one rejected line); see $work/report.log"
case "$mode" in
  table)
    python3 "$script" --table "$work/report.json" >"$work/table.tsv" || fail "--table exited $?"
    expected=$'dtype\tseqlen_k\thead_dim\nf32\t17\t8\nf32\t130\t64\nf16\t33\t40\nf16\t257\t128\nbf16\t7\t1\nbf16\t65\t96'
    got=$(cut -f1-3 "$work/table.tsv")
    [ "$got" = "$expected" ] || fail "table differs:"$'\n'"$got"
    awk -F'\t' 'NR > 1 && !($4 >= 0 && $4 <= 1) {exit 1}' "$work/table.tsv" || fail "a ratio outside [0, 1]"
    python3 "$script" --table "$work/missing.json" 2>/dev/null
    [ $? -eq 66 ] || fail "a missing file should exit 66"
    echo '{"schema": "something-else/1"}' >"$work/other.json"
    python3 "$script" --table "$work/other.json" 2>/dev/null
    [ $? -eq 65 ] || fail "a JSON that is not a report should exit 65"
    echo "plot_report.py --table: 6 judged cases of 7, exit codes 66 and 65 as documented" ;;
  plots)
    python3 "$script" "$work/report.json" -o "$work/plots" >"$work/plots.log" 2>&1 || fail "exited $?: $(cat "$work/plots.log")"
    for name in o_ratio_hist o_ratio_vs_seqlen_k o_ratio_vs_head_dim; do
      f="$work/plots/$name.png"
      [ "$(head -c 4 "$f" 2>/dev/null | tail -c 3)" = PNG ] || fail "$f is missing or not a PNG"
    done
    echo "plot_report.py: 3 plots in $work/plots" ;;
  *) fail "mode must be table or plots" ;;
esac
