#!/usr/bin/env bash
# flashcheck under pytest: subjects/python/flashcheck_pytest.py turns the report's cases and the property tier on a
# Python subject into pytest items. On the healthy callable every item passes or skips with flashcheck's reason; on
# the planted bug the items that meet it fail, each with its case line and the flashcheck-repro command that replays
# it. MODULE picks the pair: naive_attention (ctest pytest_subject, label cpu: the plain-Python kernel on the host
# model's build) or triton_attention (run by triton_example_test.sh, label gpu: the Triton example). Exit 77 (a
# skip) where pytest is not installed.
# usage: pytest_subject_test.sh BUILD_DIR PYTHON_DIR [MODULE]
set -uo pipefail
build=$1 python_dir=$2 module=${3:-naive_attention}
case "$module" in
  naive_attention) planted=attention_aligned planted_name=python-naive-aligned ;;
  triton_attention) planted=attention_tail planted_name=triton-example-tail ;;
  *) echo "usage: pytest_subject_test.sh BUILD_DIR PYTHON_DIR [naive_attention|triton_attention]" >&2; exit 2 ;;
esac
python3 -c "import pytest" 2>/dev/null || { echo "flashcheck-skip: pytest is not installed (ci/deps.sh installs it)"; exit 77; }
export PYTHONPATH="$python_dir${PYTHONPATH:+:$PYTHONPATH}"
# Each property the planted bug falsifies shrinks for at most this long (its case line is printed before shrinking).
export FLASHCHECK_SHRINK_SECONDS=${FLASHCHECK_SHRINK_SECONDS:-2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failures=0
run_pytest() {  # run_pytest WANT_RC FILE
  python3 -m pytest -q -p no:cacheprovider -p flashcheck_pytest --flashcheck-build "$build" "$python_dir/tests/$2" \
    >"$out/stdout" 2>&1
  local got=$?
  if [[ $got -ne $1 ]]; then
    # Each failing item's name, case line and replay command (the lines check() writes), then the run's tail.
    echo "FAIL: pytest $2: exit $got, expected $1"
    grep -E "^(E +)?(flashcheck: FAIL|case line:|replay:)" "$out/stdout" | sed -E 's/^E +//' | head -n 60
    tail -n 20 "$out/stdout"; failures=$((failures + 1))
  else
    echo "ok: pytest $2 (exit $got): $(tail -n 1 "$out/stdout")"
  fi
}
run_pytest 0 "test_$module.py"
grep -qE "[0-9]+ passed" "$out/stdout" || { echo "FAIL: no item passed"; failures=$((failures + 1)); }
run_pytest 1 "planted_$module.py"
grep -q "^FAILED .*test_property\[OracleAgreement\]" "$out/stdout" ||
  { echo "FAIL: OracleAgreement does not fail on the planted bug"; failures=$((failures + 1)); }
grep -q "^replay: flashcheck-repro --subject python:$module:$planted '.*subject=$planted_name seed=" \
  "$out/stdout" || { echo "FAIL: no replay command for a failing item"; failures=$((failures + 1)); }
exit $((failures > 0))
