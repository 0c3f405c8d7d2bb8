#!/usr/bin/env bash
# ctest subject_sdpa_<backend>_report (label peer): flashcheck-report's sweep and seeded random cases on one SDPA
# subject. A peer declines some valid cases (PyTorch's message, unaligned rows on flash and cudnn), so the worst
# outcome the test accepts is UNSUPPORTED (exit 3) or OUTSIDE-DOMAIN (exit 4); a FAIL (1) or a REJECTED case (2)
# fails it, and no device (69) skips it.
# usage: report_test.sh REPORT SUBJECT_LIB [report arguments...]
set -uo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: report_test.sh REPORT SUBJECT_LIB [report arguments...]" >&2
  exit 2
fi
report=$1 lib=$2
shift 2
"$report" --subject "$lib" "$@"
rc=$?
case $rc in
  0) exit 0 ;;
  3 | 4) echo "report_test: worst outcome $([ $rc -eq 3 ] && echo UNSUPPORTED || echo OUTSIDE-DOMAIN): no case failed"; exit 0 ;;
  *) exit "$rc" ;;
esac
