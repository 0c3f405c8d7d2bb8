#!/bin/sh
# Runs one GPU property binary under compute-sanitizer (ctest label sanitizer):
#   run_sanitizer.sh <compute-sanitizer or ""> <memcheck|racecheck|initcheck|synccheck> <binary> [gtest args]
# Exit 77 (ctest: skipped, with the reason printed) when compute-sanitizer or a CUDA device is missing;
# otherwise the sanitizer's verdict: --error-exitcode 1 turns any report into a failure.
sanitizer="$1"
tool="$2"
binary="$3"
shift 3
if [ -z "$sanitizer" ] || [ ! -x "$sanitizer" ]; then
  echo "flashcheck-skip: compute-sanitizer not found (put it on PATH or in CUDAToolkit_BIN_DIR and reconfigure)"
  exit 77
fi
# The GPU binaries skip every test with "flashcheck-skip: no CUDA device" when none is usable.
# FLASHCHECK_SANITIZER_PROBE: the gtest filter of the probe run (default: two property tests).
probe_filter="${FLASHCHECK_SANITIZER_PROBE:-*.RepeatedRunsAreBitIdentical:*.OnlineSoftmaxInvariants}"
probe=$(FLASHCHECK_CASES=1 "$binary" --gtest_filter="$probe_filter" 2>&1)
if printf '%s\n' "$probe" | grep -q "flashcheck-skip"; then
  echo "flashcheck-skip: no CUDA device available"
  exit 77
fi
exec "$sanitizer" --tool "$tool" --error-exitcode 1 --print-limit 20 "$binary" "$@"
