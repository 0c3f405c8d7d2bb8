# The tool tests' one check (sourced by subject_tools_test.sh and python_subject_test.sh): `expect RC DESCRIPTION --
# command...` runs the command with its output in $out/stdout and $out/stderr, and counts a failure in $failures
# (printing the output's tail) when it exits other than RC. The caller sets $out and $failures.
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
