#!/usr/bin/env bash
# The README's planted-bug example cannot drift from what the tools print: the `$ ...` command of its text
# block runs (with this build's binaries), and every line of the block but "..." must appear verbatim in the
# output; the block's reproduce string must replay the same shrunk case, and the README's flashcheck-repro
# line must print the same failure lines.
#   readme_example_test.sh README PROPERTIES_MODEL FLASHCHECK_REPRO
set -euo pipefail
readme=$1 properties=$2 repro=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The text block that starts with the planted-bug command, up to its closing fence.
awk '/^\$ FLASHCHECK_PLANT=/ {on = 1} on && /^```/ {exit} on {print}' "$readme" >"$work/block"
[ -s "$work/block" ] || fail "no '\$ FLASHCHECK_PLANT=...' block in $readme"
command_line=$(head -1 "$work/block" | sed 's/^\$ //')
echo "README: $command_line"
# VAR=VALUE words, then the binary (replaced by this build's), then its arguments.
read -r -a words <<<"$command_line"
env_words=() args=()
for w in "${words[@]}"; do
  if [ ${#args[@]} -eq 0 ] && [[ $w == *=* && $w != -* ]]; then env_words+=("$w"); else args+=("$w"); fi
done
[[ ${args[0]} == */properties_model ]] || fail "the README command runs ${args[0]}, not properties_model"
env -u RC_PARAMS -u FLASHCHECK_CASES -u FLASHCHECK_SHARD "${env_words[@]}" "$properties" "${args[@]:1}" \
  >"$work/out" 2>&1 || true

checked=0
while IFS= read -r line; do
  [ "$line" = "..." ] && continue
  if ! grep -qxF -- "$line" "$work/out"; then
    echo "README line not printed by the tools:" >&2
    echo "  $line" >&2
    echo "the tools print:" >&2
    grep -E "Falsifiable|^\(|^  - |reproduce=" "$work/out" | sed 's/^/  /' >&2
    fail "the README example drifted from $command_line"
  fi
  checked=$((checked + 1))
done < <(tail -n +2 "$work/block")
echo "$checked README lines printed by the property binary"

# The reproduce string replays the same shrunk case and failures.
reproduce=$(grep -oE 'reproduce=[A-Za-z0-9+/]+' "$work/block")
env -u FLASHCHECK_CASES -u FLASHCHECK_SHARD -u FLASHCHECK_SEED FLASHCHECK_PLANT=missing-rescale \
  RC_PARAMS="$reproduce" "$properties" "${args[@]:1}" >"$work/replay" 2>&1 || true
grep -E '^"|^  - ' "$work/block" >"$work/expected"
while IFS= read -r line; do
  grep -qxF -- "$line" "$work/replay" || fail "the README's reproduce string no longer replays: '$line' missing"
done <"$work/expected"
echo "the reproduce string replays the same case and failures"

# The README's flashcheck-repro line: the same failure lines.
repro_line=$(grep -m1 -E '^build/ci/tools/flashcheck-repro --backend model --defect missing-rescale "' "$readme") ||
  fail "no flashcheck-repro replay line in $readme"
case_line=$(sed -E 's/^[^"]*"([^"]*)".*/\1/' <<<"$repro_line")
grep -qxF "case line: $case_line" "$work/block" || fail "the repro line's case differs from the block's: $case_line"
"$repro" --backend model --defect missing-rescale "$case_line" >"$work/repro" 2>&1 || true
grep -E '^  - ' "$work/block" | while IFS= read -r line; do
  grep -qxF -- "$line" "$work/repro" || fail "flashcheck-repro prints other numbers than README: '$line'"
done
echo "PASS: the README's planted-bug example matches the tools"
