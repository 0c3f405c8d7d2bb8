#!/usr/bin/env bash
# Writes the CTest resource spec of this runner's GPUs, for `ctest --resource-spec-file`: every gpu-labelled
# test holds one slot of one GPU (RESOURCE_GROUPS gpus:1) and selects that CUDA device itself
# (CTEST_RESOURCE_GROUP_0_GPUS, flashcheck/device.h). GPU ids are the CUDA ordinals 0..n-1 of the devices the
# tests will see; where they come from, the first that applies:
#   FLASHCHECK_RESOURCE_SPEC=FILE   that file, unchanged (a runner that writes its own spec)
#   FLASHCHECK_GPU_COUNT=N          N GPUs, asked of nothing (a runner that knows; the CPU tier's fake spec)
#   CUDA_VISIBLE_DEVICES=a,b,...    one GPU per entry (set but empty: none)
#   nvidia-smi --query-gpu=index --format=csv,noheader   one GPU per line
#   otherwise one GPU: with no device the GPU tests still run, and skip with their reason, rather than end as
#   "not run" for want of a resource.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: ci/resource_spec.sh [--gpus N|all] [--slots-per-gpu K] [--count | --visible] [-o FILE]
  Writes a CTest resource spec (JSON, version 1.0) listing this runner's GPUs, K slots each (K tests share a GPU).
  --gpus N|all        the first N GPUs, or every one (default all); more than there are is an error
  --slots-per-gpu K   concurrent GPU tests per GPU (default: $FLASHCHECK_SLOTS_PER_GPU, else 6)
  --count             print the number of GPUs in the spec instead of the spec
  --visible           print one CUDA_VISIBLE_DEVICES value per GPU found (none without a GPU), for one
                      process per GPU (ci/nightly_fuzz.sh, the sharded property run of ci/gpu_tier.sh)
  -o FILE             write the spec to FILE (default: standard output)
environment (the first that is set decides the GPUs):
  FLASHCHECK_RESOURCE_SPEC=FILE  use FILE as the spec      FLASHCHECK_GPU_COUNT=N  N GPUs, no query
  CUDA_VISIBLE_DEVICES           one GPU per entry         otherwise nvidia-smi (FLASHCHECK_NVIDIA_SMI=PATH)
  no GPU found: one, so GPU tests run and skip with their reason
example: ctest --test-dir build/gpu -L gpu --resource-spec-file <(ci/resource_spec.sh) -j 8
exit status: 0 written, 2 usage error (or fewer GPUs than --gpus asks for)
USAGE
}

want=all
slots=${FLASHCHECK_SLOTS_PER_GPU:-6}
count_only=0
visible_only=0
out=-
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --gpus) want=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
    --gpus=*) want=${1#--gpus=}; shift ;;
    --slots-per-gpu) slots=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
    --slots-per-gpu=*) slots=${1#--slots-per-gpu=}; shift ;;
    --count) count_only=1; shift ;;
    --visible) visible_only=1; shift ;;
    -o) out=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
    *) echo "resource_spec.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
if ! [[ $want == all || $want =~ ^[1-9][0-9]*$ ]]; then
  echo "resource_spec.sh: --gpus takes a whole number >= 1 or 'all', not '$want'" >&2
  exit 2
fi
if ! [[ $slots =~ ^[1-9][0-9]*$ ]]; then
  echo "resource_spec.sh: --slots-per-gpu takes a whole number >= 1, not '$slots'" >&2
  exit 2
fi

emit() {
  if [ "$out" = - ]; then cat; else cat >"$out"; fi
}

# A given spec: used as it is (its GPU count read back for --count).
if [ -n "${FLASHCHECK_RESOURCE_SPEC:-}" ]; then
  if [ ! -r "$FLASHCHECK_RESOURCE_SPEC" ]; then
    echo "resource_spec.sh: FLASHCHECK_RESOURCE_SPEC=$FLASHCHECK_RESOURCE_SPEC is not a readable file" >&2
    exit 2
  fi
  if [ "$count_only" = 1 ] || [ "$visible_only" = 1 ]; then
    python3 -c 'import json, sys
gpus = json.load(open(sys.argv[1]))["local"][0].get("gpus", [])
print("\n".join(g["id"] for g in gpus) if sys.argv[2] == "1" else len(gpus))' "$FLASHCHECK_RESOURCE_SPEC" "$visible_only"
  else
    emit <"$FLASHCHECK_RESOURCE_SPEC"
  fi
  echo "resource spec: $FLASHCHECK_RESOURCE_SPEC (FLASHCHECK_RESOURCE_SPEC)" >&2
  exit 0
fi

if [ -n "${FLASHCHECK_GPU_COUNT:-}" ]; then
  # At most 1024: a count past any one host's GPUs is a mistake, and seq over it would not end.
  [[ $FLASHCHECK_GPU_COUNT =~ ^[0-9]{1,4}$ ]] && [ "$FLASHCHECK_GPU_COUNT" -le 1024 ] ||
    { echo "resource_spec.sh: FLASHCHECK_GPU_COUNT='$FLASHCHECK_GPU_COUNT' is not a whole number in [0, 1024]" >&2; exit 2; }
  found=$FLASHCHECK_GPU_COUNT source="FLASHCHECK_GPU_COUNT"
  selectors=$(seq 0 $((found - 1)))
elif [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
  # The tests see these devices as ordinals 0..n-1, whatever the entries are (indices or GPU-UUIDs); one
  # process per GPU gets one entry.
  selectors=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep . || true)
  found=$(grep -c . <<<"$selectors" || true)
  source="CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
else
  smi=${FLASHCHECK_NVIDIA_SMI:-nvidia-smi}
  found=0 source="no nvidia-smi" selectors=""
  if command -v "$smi" >/dev/null 2>&1; then
    found=$("$smi" --query-gpu=index --format=csv,noheader 2>/dev/null | grep -cE '^[[:space:]]*[0-9]+' || true)
    source="nvidia-smi"
    # CUDA_VISIBLE_DEVICES=k names CUDA's k-th device (CUDA_DEVICE_ORDER), not nvidia-smi's: 0..n-1 name
    # every GPU once either way.
    [ "$found" -gt 0 ] && selectors=$(seq 0 $((found - 1)))
  fi
fi

gpus=$found
if [ "$gpus" -eq 0 ]; then
  gpus=1
  source="$source; no GPU found, one listed so GPU tests run and skip"
fi
if [ "$want" != all ]; then
  if [ "$want" -gt "$found" ] && [ "$found" -gt 0 ]; then
    echo "resource_spec.sh: --gpus $want, but $found GPU(s) found ($source)" >&2
    exit 2
  fi
  [ "$want" -lt "$gpus" ] && gpus=$want
fi

if [ "$visible_only" = 1 ]; then
  [ "$found" -gt 0 ] && head -n "$gpus" <<<"$selectors"
elif [ "$count_only" = 1 ]; then
  echo "$gpus"
else
  {
    echo '{'
    echo '  "version": {"major": 1, "minor": 0},'
    echo '  "local": ['
    echo '    {'
    echo '      "gpus": ['
    for ((g = 0; g < gpus; ++g)); do
      sep=,; [ "$g" -eq $((gpus - 1)) ] && sep=
      echo "        {\"id\": \"$g\", \"slots\": $slots}$sep"
    done
    echo '      ]'
    echo '    }'
    echo '  ]'
    echo '}'
  } | emit
fi
echo "resource spec: $gpus GPU(s), $slots slot(s) each ($source)" >&2
