#!/usr/bin/env bash
# ctest known_peer_deviation.<name> (label gpu): replays a peer's finding on its subject (an SDPA library, or a Python
# peer's python:MODULE:FUNCTION spec, skipped where its package does not import), with the
# subject's alignment guard lifted (FLASHCHECK_SDPA_UNGUARDED=1), and passes while the peer still deviates:
# flashcheck-repro exits 1 (FAIL) and prints EXPECTED. Exit 0 from repro means the peer no longer deviates:
# the test fails and says so, so the finding and its guard or discard class can be retired.
# usage: known_deviation_test.sh REPRO SUBJECT_LIB FINDING.case EXPECTED_REGEX
set -uo pipefail
if [[ $# -ne 4 ]]; then
  echo "usage: known_deviation_test.sh REPRO SUBJECT_LIB FINDING.case EXPECTED_REGEX" >&2
  exit 2
fi
repro=$1 lib=$2 finding=$3 expected=$4
out=$(FLASHCHECK_SDPA_UNGUARDED=1 "$repro" --subject "$lib" --file "$finding" 2>&1)
rc=$?
echo "$out" | tail -n 25
case $rc in
  69) echo "flashcheck-skip: no CUDA device"; exit 69 ;;
  3) if grep -q "not importable here" <<<"$out"; then echo "flashcheck-skip: the peer's Python package is missing here"; exit 69; fi
     echo "flashcheck-repro exited 3 (unsupported), expected 1 (the recorded deviation)"; exit 1 ;;
  0) echo "known peer deviation $(basename "$finding" .case): the peer now passes; retire the finding"; exit 1 ;;
  1) if grep -qE -- "$expected" <<<"$out"; then
       echo "known peer deviation $(basename "$finding" .case) reproduces (exit 1, '$expected')"; exit 0
     fi
     echo "the finding fails, but not as recorded: no '$expected' in the output"; exit 1 ;;
  *) echo "flashcheck-repro exited $rc, expected 1 (the recorded deviation)"; exit 1 ;;
esac
