#!/usr/bin/env bash
# Every entry point answers --help: exit status 0 and a usage text (the word "usage", any case), without doing
# its work (each runs under a 30 s limit, no build, no network). Walks the C++ tools given as arguments and the
# scripts of ci/, bench/, tools/ and tools/dev/ (shell and Python; a Python script that needs PyTorch, numpy or
# matplotlib answers --help without them).
#   help_test.sh SOURCE_DIR [TOOL...]
set -uo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  echo "usage: help_test.sh SOURCE_DIR [TOOL...]"
  exit 0
fi
src=$1
shift
cd "$src" || exit 2
entries=("$@")
for f in ci/*.sh ci/*.py bench/*.sh bench/*.py tools/*.py tools/dev/*.sh tools/dev/*.py; do
  [ -f "$f" ] && entries+=("$f")
done
failed=0
for entry in "${entries[@]}"; do
  case "$entry" in
    *.py) cmd=(python3 "$entry") ;;
    *.sh) cmd=(bash "$entry") ;;
    *) cmd=("$entry") ;;
  esac
  out=$(timeout 30 "${cmd[@]}" --help 2>&1)
  rc=$?
  if [ $rc -ne 0 ] || ! grep -qi usage <<<"$out"; then
    echo "FAIL $(basename "$entry") --help: exit $rc, $(grep -ci usage <<<"$out") usage lines"
    head -5 <<<"$out" | cut -c1-150
    failed=1
  else
    echo "ok   $(basename "$entry") --help"
  fi
done
exit $failed
