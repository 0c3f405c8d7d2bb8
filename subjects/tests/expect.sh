# The tool tests' checks (sourced by subject_tools_test.sh, python_subject_test.sh and triton_example_test.sh):
# `expect RC DESCRIPTION -- command...` runs the command with its output in $out/stdout and $out/stderr, and counts a
# failure in $failures (printing the output's tail) when it exits other than RC. The caller sets $out and $failures.
expect() {
  local want=$1 what=$2
  shift 3
  "$@" >"$out/stdout" 2>"$out/stderr"
  local got=$?
  if [[ $got -ne $want ]]; then
    echo "FAIL: $what: exit $got, expected $want"; tail -n 8 "$out/stdout" "$out/stderr"; failures=$((failures + 1))
  else
    echo "ok: $what (exit $got)"
  fi
}

# `expect_finding REPRO PLANTED LINE TAIL`: the planted subject fails LINE (exit 1), the case line it prints ends in TAIL
# (it names the subject, with the seed) and replays to a failure on it; the line is left in $finding.
expect_finding() {
  local repro=$1 planted=$2 line=$3 tail=$4
  expect 1 "repro, planted bug" -- "$repro" --subject "$planted" "$line"
  finding=$(sed -n 's/^case: //p' "$out/stdout" | head -1)
  [[ "$finding" == *"$tail" ]] ||
    { echo "FAIL: the finding's line does not name the subject: $finding"; failures=$((failures + 1)); }
  expect 1 "repro, the finding replays" -- "$repro" --subject "$planted" "$finding"
}
