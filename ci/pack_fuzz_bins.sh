#!/usr/bin/env bash
# Builds the clang fuzz binaries on a machine with clang and nvcc and packs them, debug info stripped and
# xz-compressed, into DIR for a GPU machine without clang; --unpack restores them there (xz, or Python's lzma where
# xz is missing). The nightly set is about 89 MB (fuzz_kernel 43 MB with its libomp, fuzz_api and fuzz_model 22 MB
# each): where a copy to the GPU machine is capped at 64 MiB, fuzz_kernel and libomp travel alone, the nightly runs
# there with FLASHCHECK_FUZZ_CPU_TARGETS empty, and the CPU targets fuzz where they were built.
#
#   ci/pack_fuzz_bins.sh [DIR]            preset `fuzz` in build/fuzz: fuzz_kernel, fuzz_kernel_mutant, fuzz_api,
#                                         fuzz_model and the decoder into DIR (default .gpubin/fuzz), for
#                                         FLASHCHECK_FUZZ_PREBUILT=DIR ci/gpu_tier.sh fuzz=600
#   ci/pack_fuzz_bins.sh --nightly [DIR]  the binaries ci/nightly_fuzz.sh runs, built as it builds them: fuzz_api,
#                                         fuzz_model and the decoder in build/fuzz (preset fuzz, ASan + UBSan) and
#                                         fuzz_kernel without sanitizers in build/fuzz-kernel (preset fuzz with
#                                         FLASHCHECK_FUZZ_SANITIZE empty, libFuzzer's coverage kept), so the
#                                         nightly's executions/s are those of the unsanitized fuzz_kernel; into DIR
#                                         (default .gpubin/nightly). On the GPU machine unpack them into one
#                                         directory and run FLASHCHECK_FUZZ_NO_BUILD=1 FLASHCHECK_FUZZ_BUILD=<that dir>
#                                         ci/nightly_fuzz.sh BUDGET_SECONDS OUTDIR (fuzz_kernel is found beside
#                                         the rest).
#   ci/pack_fuzz_bins.sh --unpack DIR BIN the packed binaries of DIR, decompressed and executable, into BIN.
#
# A relative DIR is taken from the repository root. The binaries must be run with the checkout of the commit they
# were built from (the nightly reads fuzz/dict and fuzz/corpus from it).
set -euo pipefail
usage() {
  cat <<'USAGE'
usage: ci/pack_fuzz_bins.sh [--nightly] [DIR]
       ci/pack_fuzz_bins.sh --unpack DIR BIN
  Builds the clang fuzz binaries and packs them stripped (--strip-debug) and xz-compressed into DIR for a GPU
  machine without clang. A relative DIR is taken from the repository root.
  (default)  preset fuzz in build/fuzz: fuzz_kernel, fuzz_kernel_mutant, fuzz_api, fuzz_model,
             flashcheck-fuzz-decode into DIR (default .gpubin/fuzz), for
             FLASHCHECK_FUZZ_PREBUILT=DIR ci/gpu_tier.sh fuzz=600
  --nightly  the binaries ci/nightly_fuzz.sh runs, built as it builds them: fuzz_api, fuzz_model and
             flashcheck-fuzz-decode in build/fuzz (preset fuzz, ASan + UBSan), fuzz_kernel without sanitizers in
             build/fuzz-kernel (preset fuzz, -DFLASHCHECK_FUZZ_SANITIZE=), so the nightly's executions/s are
             measured on the unsanitized fuzz_kernel; into DIR (default .gpubin/nightly). On the GPU machine:
               ci/pack_fuzz_bins.sh --unpack DIR BIN
               FLASHCHECK_FUZZ_NO_BUILD=1 FLASHCHECK_FUZZ_BUILD=BIN ci/nightly_fuzz.sh BUDGET_SECONDS OUTDIR
  --unpack   DIR's packed binaries into BIN (created), decompressed with xz or, where xz is missing, with
             Python's lzma module, and made executable.
USAGE
}
nightly=0
case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  --nightly) nightly=1; shift ;;
  --unpack)
    [ $# -eq 3 ] || { usage >&2; exit 2; }
    [ -d "$2" ] || { echo "pack_fuzz_bins: --unpack: no directory $2" >&2; exit 2; }
    mkdir -p "$3"
    found=0
    for z in "$2"/*.xz; do
      [ -e "$z" ] || continue
      found=1
      out="$3/$(basename "$z" .xz)"
      if command -v xz >/dev/null; then
        xz -dc "$z" >"$out"
      else
        python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$z" "$out"
      fi
      chmod +x "$out"
    done
    [ "$found" = 1 ] || { echo "pack_fuzz_bins: --unpack: no .xz files in $2" >&2; exit 1; }
    if [ -f "$2/COMMIT" ]; then cp "$2/COMMIT" "$3/COMMIT"; fi
    ls -la "$3"
    exit 0 ;;
  -*) usage >&2; exit 2 ;;
esac
[ $# -le 1 ] || { usage >&2; exit 2; }
cd "$(dirname "$0")/.."
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"

# pack DIR BUILD_DIR:TARGET...: each target's executable from its build directory, stripped and xz-compressed into DIR,
# with the LLVM runtime libraries they link (libomp: clang's OpenMP, which a GPU image without clang lacks); the
# binaries find those beside them (RUNPATH $ORIGIN, fuzz/CMakeLists.txt). DIR/COMMIT names the tree they were built
# from (git describe --dirty), which --unpack carries beside them and the nightly's summary reports.
pack() {
  local dir=$1 entry build bin path lib; shift
  rm -rf "$dir" && mkdir -p "$dir"
  for entry in "$@"; do
    build=${entry%%:*} bin=${entry#*:}
    path=$(find "$build" -type f -name "$bin" -perm -u+x | head -1)
    [ -n "$path" ] || { echo "missing $bin in $build" >&2; exit 1; }
    strip --strip-debug -o "$dir/$bin" "$path"
    xz -f -T0 -9 "$dir/$bin"
    for lib in $(ldd "$path" | awk '$3 ~ /\/llvm-[0-9]+\/|libomp/ {print $3}'); do
      [ -e "$dir/$(basename "$lib").xz" ] || xz -c -T0 -9 "$(readlink -f "$lib")" >"$dir/$(basename "$lib").xz"
    done
  done
  git describe --always --dirty >"$dir/COMMIT" 2>/dev/null || echo unknown >"$dir/COMMIT"
  ls -la "$dir"
}

if [ "$nightly" = 1 ]; then
  dir="${1:-.gpubin/nightly}"
  cmake --preset fuzz >/dev/null
  cmake --build build/fuzz -j "$(nproc)" --target fuzz_api fuzz_model flashcheck-fuzz-decode
  cmake --preset fuzz -B build/fuzz-kernel -DFLASHCHECK_FUZZ_SANITIZE= >/dev/null
  cmake --build build/fuzz-kernel -j "$(nproc)" --target fuzz_kernel
  pack "$dir" build/fuzz-kernel:fuzz_kernel build/fuzz:fuzz_api build/fuzz:fuzz_model build/fuzz:flashcheck-fuzz-decode
else
  dir="${1:-.gpubin/fuzz}"
  cmake --preset fuzz >/dev/null
  cmake --build build/fuzz -j "$(nproc)" --target fuzz_kernel fuzz_kernel_mutant fuzz_api fuzz_model flashcheck-fuzz-decode
  pack "$dir" build/fuzz:fuzz_kernel build/fuzz:fuzz_kernel_mutant build/fuzz:fuzz_api build/fuzz:fuzz_model \
    build/fuzz:flashcheck-fuzz-decode
fi
