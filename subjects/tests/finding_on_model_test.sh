#!/usr/bin/env bash
# ctest peer_finding_on_model.<name> (label cpu): a peer's stored finding (subjects/*/findings/<name>.case) is a
# deviation of the peer, not of the semantics the suite holds it to: flashcheck's host model passes its line (the
# property's relation, or the oracle's verdict), the line's subject= left out. Extra arguments go to flashcheck-repro
# (a planted --defect shows the check can fail).
# usage: finding_on_model_test.sh REPRO FINDING.case [REPRO_ARGS...]
set -uo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: finding_on_model_test.sh REPRO FINDING.case [REPRO_ARGS...]" >&2
  exit 2
fi
repro=$1 finding=$2
shift 2
lines=$(mktemp)
trap 'rm -f "$lines"' EXIT
grep -v '^#' "$finding" | sed 's/ subject=[^ ]*//' >"$lines"
"$repro" --backend model "$@" --file "$lines"
