#!/usr/bin/env bash
# Builds the clang fuzz binaries (preset `fuzz`: fuzz_kernel, fuzz_kernel_mutant, fuzz_api, fuzz_model and the
# decoder) on a machine with clang and nvcc, and packs them, debug info stripped and gzipped, into DIR
# (default .gpubin/fuzz) for a GPU machine without clang:  FLASHCHECK_FUZZ_PREBUILT=DIR ci/gpu_tier.sh fuzz=600
set -euo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  cat <<'USAGE'
usage: ci/pack_fuzz_bins.sh [DIR]
  Builds the clang fuzz binaries (preset fuzz) and packs them stripped and gzipped into DIR (default .gpubin/fuzz)
  for a GPU machine without clang: FLASHCHECK_FUZZ_PREBUILT=DIR ci/gpu_tier.sh fuzz=600
USAGE
  exit 0
fi
cd "$(dirname "$0")/.."
dir="${1:-.gpubin/fuzz}"
cmake --preset fuzz >/dev/null
cmake --build build/fuzz -j "$(nproc)" --target fuzz_kernel fuzz_kernel_mutant fuzz_api fuzz_model flashcheck-fuzz-decode
rm -rf "$dir" && mkdir -p "$dir"
for bin in fuzz_kernel fuzz_kernel_mutant fuzz_api fuzz_model flashcheck-fuzz-decode; do
  path=$(find build/fuzz -type f -name "$bin" -perm -u+x | head -1)
  [ -n "$path" ] || { echo "missing $bin" >&2; exit 1; }
  strip --strip-debug -o "$dir/$bin" "$path"
  gzip -f "$dir/$bin"
done
ls -la "$dir"
