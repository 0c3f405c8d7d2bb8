#!/bin/bash -eu
# OSS-Fuzz / ClusterFuzzLite build of flashcheck's CPU fuzz targets (fuzz_api, fuzz_model, fuzz_backward,
# fuzz_case); no CUDA.
# Runs in the base-builder image with the usual variables: $CC $CXX $CFLAGS $CXXFLAGS (sanitizers and
# coverage instrumentation), $LIB_FUZZING_ENGINE (the engine to link), $SRC (sources), $OUT (results).
# Leaves in $OUT per target: the binary, <target>_seed_corpus.zip, <target>.dict and <target>.options.
src=$SRC/flashcheck
build=$WORK/flashcheck-build
cmake -S "$src" -B "$build" -G Ninja \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_CXX_FLAGS="$CXXFLAGS" -DCMAKE_BUILD_TYPE= \
  -DFLASHCHECK_CUDA=OFF -DFLASHCHECK_TESTS=OFF -DFLASHCHECK_BENCH=OFF \
  -DFLASHCHECK_FUZZ=ON -DFLASHCHECK_FUZZ_EXTERNAL_FLAGS=ON -DFLASHCHECK_FUZZ_ENGINE="$LIB_FUZZING_ENGINE"
cmake --build "$build" -j "$(nproc)" --target fuzz_api fuzz_model fuzz_backward fuzz_case

for target in fuzz_api fuzz_model fuzz_backward fuzz_case; do
  cp "$build/fuzz/$target" "$OUT/$target"
  (cd "$src/fuzz/corpus/$target" && zip -q -j "$OUT/${target}_seed_corpus.zip" ./*)
  cp "$src/fuzz/dict/$target.dict" "$OUT/$target.dict"
  # fuzz_model and fuzz_backward executions take milliseconds (bounded cases); inputs past 4 KiB decode to nothing
  # new. fuzz_case holds every case line to a second and a GB (its finding is a slower or larger one).
  limits=""
  if [ "$target" = fuzz_case ]; then limits='timeout = 1\nrss_limit_mb = 1024\n'; fi
  printf "[libfuzzer]\ndict = %s.dict\nmax_len = 4096\n$limits" "$target" >"$OUT/$target.options"
done
