#!/usr/bin/env bash
# The benchmark in one call on a GPU machine with PyTorch: builds flashcheck_bench, libflashcheck.so and
# flashcheck-report in BUILD_DIR (configuring a bench-only Release build there if it has none), then runs each
# section into OUT_DIR:
#   forward        flashcheck_bench's C++ sweep (bench_cpp.{json,txt}) and side_by_side.py (side_by_side.{json,md},
#                  tflops_{bf16,fp16,fp32}.png, heads.png, memory.png)
#   accuracy       side_by_side.py --accuracy-seeds 30 (accuracy_seeds.{json,md})
#   features       features_bench.py (features.{json,md})
#   decode         decode_bench.py (decode.{json,md})
#   backward       flashcheck_bench --pass backward, and --deterministic (backward.json, backward_deterministic.json),
#                  peers_backward.py beside them (peers_backward.json, backward_vs_peers.md)
#   seed_workload  seed_workload.py, verified on the kernel and timed (seed_workload.{json,md})
# `bash bench/run_bench.sh build/bench bench/results` regenerates the result set the READMEs show; a partial run
# (--quick, --only) is refused there, as each script refuses it (bench/bench_cli.py).
#   bash bench/run_bench.sh BUILD_DIR OUT_DIR [--quick] [--only SECTION,...]
# FLASHCHECK_BENCH_PREBUILT=1 skips the build and uses BUILD_DIR/bench/{flashcheck_bench,libflashcheck.so} and
# BUILD_DIR/tools/flashcheck-report.
set -euo pipefail
sections_all="forward accuracy features decode backward seed_workload"
usage="usage: bench/run_bench.sh BUILD_DIR OUT_DIR [--quick] [--only SECTION,...]   (sections: ${sections_all// /, })"
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  sed -n '2,17p' "$0" | cut -c3-
  echo "$usage"
  exit 0
fi
if [ $# -lt 2 ]; then
  echo "$usage" >&2
  exit 2
fi
cd "$(dirname "$0")/.."
build="$1"
out="$2"
shift 2
quick=""
sections="$sections_all"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick="--quick" ;;
    --only)
      [ $# -ge 2 ] || { echo "run_bench: --only needs a list of sections" >&2; exit 2; }
      sections="${2//,/ }"
      for s in $sections; do
        [[ " $sections_all " == *" $s "* ]] || { echo "run_bench: --only: unknown section $s; $usage" >&2; exit 2; }
      done
      shift ;;
    *) echo "run_bench: unknown argument $1; $usage" >&2; exit 2 ;;
  esac
  shift
done
if [ "$(realpath -m "$out")" = "$(realpath bench/results)" ] && { [ -n "$quick" ] || [ "$sections" != "$sections_all" ]; }; then
  echo "run_bench: bench/results holds one whole result set; a partial run (--quick, --only) writes part of one" >&2
  exit 2
fi
wants() { [[ " $sections " == *" $1 "* ]]; }
export PATH="/usr/local/cuda/bin:$PATH"
mkdir -p "$out"
start=$(date +%s)
if [ "${FLASHCHECK_BENCH_PREBUILT:-0}" != 1 ]; then
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
      -DFLASHCHECK_TESTS=OFF -DFLASHCHECK_BENCH=ON >/dev/null
  fi
  cmake --build "$build" -j "$(nproc)" --target flashcheck_bench flashcheck_shared flashcheck-report
  echo "run_bench: build took $(( $(date +%s) - start )) s"
fi
lib="$build/bench/libflashcheck.so"
grid=paper
[ -n "$quick" ] && grid=quick
step() { echo "run_bench: $1 done at $(( $(date +%s) - start )) s"; }
export PYTHONUNBUFFERED=1
if wants forward; then
  "$build/bench/flashcheck_bench" --grid "$grid" --out "$out/bench_cpp.json" | tee "$out/bench_cpp.txt"
  python3 bench/side_by_side.py --lib "$lib" --out "$out" --rounds 5 --iters 20 $quick
  step forward
fi
if wants accuracy; then
  python3 bench/side_by_side.py --lib "$lib" --out "$out" --accuracy-seeds "$([ -n "$quick" ] && echo 3 || echo 30)"
  step accuracy
fi
if wants features; then
  python3 bench/features_bench.py --lib "$lib" --out "$out" $quick
  step features
fi
if wants decode; then
  python3 bench/decode_bench.py --lib "$lib" --out "$out" $quick
  step decode
fi
if wants backward; then
  # The backward grid is the quick one (N = 1k and 4k) in the result set; the paper grid is flashcheck_bench's option.
  "$build/bench/flashcheck_bench" --pass backward --grid quick --out "$out/backward.json"
  "$build/bench/flashcheck_bench" --pass backward --deterministic --grid quick --out "$out/backward_deterministic.json"
  python3 bench/peers_backward.py --grid quick --flashcheck "$out/backward.json" --out "$out"
  step backward
fi
if wants seed_workload; then
  python3 bench/seed_workload.py --lib "$lib" --report "$build/tools/flashcheck-report" --out "$out" $quick
  step seed_workload
fi
echo "run_bench: done in $(( $(date +%s) - start )) s"
