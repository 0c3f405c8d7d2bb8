#!/usr/bin/env bash
# The GPU tier in one call on a Hopper machine (the lent H100 or a GPU CI runner): build the `gpu` preset,
# run ctest -L gpu (properties, kernel tests, regression findings), the sanitizer tier, and optionally the
# fuzz kernel target and the benchmark. Logs go to $OUT (default ./out). Steps are chosen by arguments:
#   ci/gpu_tier.sh [--gpus N|all] build tests tests-pending properties=CASES report sanitizer fuzz=SECONDS |
#                  fuzz-bg=SECONDS ... fuzz-wait  mutant=SECONDS bench
# --gpus spreads the work over the runner's GPUs (default all): ctest through a CTest resource spec
# (ci/resource_spec.sh) with -j scaled by the GPU count, the sharded property run one shard per GPU, the
# fuzz steps one fuzz_kernel worker per GPU.
# Without network: RapidCheck comes from .devdeps (ci/devdeps.sh pack, here) when it is not installed.
set -uo pipefail
if [[ $# -eq 0 || "${1:-}" == -h || "${1:-}" == --help ]]; then
  cat <<'USAGE'
usage: ci/gpu_tier.sh [--gpus N|all] STEP...   (on a Hopper machine; logs in $FLASHCHECK_LOGS, summary in $OUT)
  --gpus N|all     use the first N GPUs or all of them (default all; ci/resource_spec.sh finds them)
steps, run in the order given:
  build            configure and build preset gpu (RapidCheck & co. from .devdeps without network)
  tests            ctest -L gpu over the GPUs (a resource spec, -j = GPUs x slots per GPU; JUnit XML:
                   build/gpu/ctest-junit.xml), property case counts and RC_CLASSIFY
  tests-pending    the tests earlier `tests` / `tests-pending` runs (same FLASHCHECK_LOGS) did not start, stopped
                   or failed (FLASHCHECK_TESTS_STOP_AFTER, a call's time limit), then the case counts over all runs
  properties=CASES the GPU property binaries with CASES cases per property, sharded over the GPUs
                   (FLASHCHECK_SHARD=i/n, one shard per GPU, base seed FLASHCHECK_SEED or the date)
  budget=SECONDS   the budgeted tier: every GPU property within SECONDS, in turns of equal time
                   (FLASHCHECK_BUDGET, <Suite>.Budgeted), the case count per property printed
  report           flashcheck-report --backend gpu
  subjects         the report and the GPU properties on flashcheck's kernel and on every subject built (the
                   example; SDPA flash, cudnn, efficient, math where libtorch was found; through the Python bridge
                   the Triton example, FlexAttention and FlashAttention-3 where each imports: the fa3-fwd wheel on
                   PYTHONPATH), then the subject x dtype table (tools/subject_table.py) in $OUT/subjects.md
  sanitizer        ctest -L sanitizer (compute-sanitizer memcheck, racecheck, initcheck, synccheck), spread
                   over the GPUs
  fuzz=SECONDS     fuzz_kernel for SECONDS;  fuzz-bg=SECONDS ... fuzz-wait: the same in the background
  mutant=SECONDS   the planted kernel bug from an empty corpus, its finding replayed
  mutants=SECONDS  build preset gpu-mutants and run tools/mutation_test.py: the budgeted tier for SECONDS on
                   every mutant of the catalogue, split over the run's GPUs, the kill table in $OUT/mutation.md
                   (FLASHCHECK_MUTATION_ARGS: more arguments, e.g. --repeat 10 --perturb 7 --exclude tc-offset-32bit)
  bench            the benchmark's forward section (bench/run_bench.sh --only forward)
environment: FLASHCHECK_FUZZ_PREBUILT=DIR (fuzz binaries from ci/pack_fuzz_bins.sh; with fuzz_kernel alone in it,
  FLASHCHECK_FUZZ_CPU_TARGETS= as well: ci/nightly_fuzz.sh), OUT, FLASHCHECK_LOGS,
  FLASHCHECK_PEERS=1 (build the SDPA subjects for `tests` too; `subjects` always does),
  FLASHCHECK_TESTS_STOP_AFTER=SECONDS (no test of `tests` or `tests-pending` starts after SECONDS, and those
  running then stop; `tests-pending` in a later call runs what they left),
  FLASHCHECK_DEADLINE=SECONDS (the same for every ctest step, counted from the script's start: the sanitizer's too),
  FLASHCHECK_SLOTS_PER_GPU (GPU tests sharing a GPU, default 6), FLASHCHECK_CTEST_JOBS (ctest -j, default
  GPUs x slots), FLASHCHECK_CTEST_ARGS (more ctest arguments for `tests`), FLASHCHECK_SEED (base seed of
  properties=CASES), FLASHCHECK_SUBJECT_CASES (cases per property in `subjects`, default 100),
  FLASHCHECK_SUBJECT_RANDOM (random cases per dtype of the report in `subjects`, default 100),
  FLASHCHECK_SUBJECT_TIMEOUT (seconds each subject's report and property run of `subjects` may take together; the
  property run gets what the report left, its properties not started by three quarters of that skip
  (FLASHCHECK_STOP_AFTER) so that its XML counts what ran; unset: no limit),
  FLASHCHECK_SUBJECTS (tags, comma-separated: the subjects `subjects` runs, e.g. triton_attention,flex_attention; the
  table takes every subject's results in FLASHCHECK_LOGS, so two calls on one machine make one table),
  FLASHCHECK_SANITIZER_PER_GPU (sanitizer tests sharing a GPU, default 2)
USAGE
  [[ $# -eq 0 ]] && exit 2
  exit 0
fi
cd "$(dirname "$0")/.."
gpus_arg=all
case "${1:-}" in
  --gpus) gpus_arg=${2:-}; shift 2 || { echo "--gpus needs N or all" >&2; exit 2; } ;;
  --gpus=*) gpus_arg=${1#--gpus=}; shift ;;
esac
# Prebuilt fuzz binaries (xz-compressed by ci/pack_fuzz_bins.sh, built with clang elsewhere: the GPU image has no
# clang) in FLASHCHECK_FUZZ_PREBUILT are unpacked and used by the fuzz steps.
if [ -n "${FLASHCHECK_FUZZ_PREBUILT:-}" ]; then
  export FLASHCHECK_FUZZ_BUILD=/tmp/flashcheck-fuzz-bin FLASHCHECK_FUZZ_NO_BUILD=1
  bash "$(dirname "$0")/pack_fuzz_bins.sh" --unpack "$FLASHCHECK_FUZZ_PREBUILT" "$FLASHCHECK_FUZZ_BUILD/fuzz" >/dev/null
fi
# CUDA under ASan needs the low address range ASan would protect.
export ASAN_OPTIONS="${ASAN_OPTIONS:-protect_shadow_gap=0:detect_leaks=0}"
OUT="${OUT:-$PWD/out}"
LOGS="${FLASHCHECK_LOGS:-/tmp/flashcheck-gpu-tier}"  # everything; $OUT gets summary.txt + logs.tar.gz
mkdir -p "$OUT" "$LOGS"
export PATH="/usr/local/cuda/bin:$PATH"
jobs="$(nproc)"
status=0
log() { echo "== $(date +%T) $*" | tee -a "$LOGS/summary.txt"; }
# A subject's tag in the logs (subjects step): flashcheck, the library's name without libflashcheck_subject_ (example,
# sdpa_flash, ...), or a Python spec's module (triton_attention, ...).
subject_tag() {
  local lib=$1 tag
  if [[ "$lib" == python:* ]]; then tag=${lib#python:}; tag=${tag%%:*}; else
    tag=$(basename "$lib" .so); tag=${tag#libflashcheck_subject_}; fi
  echo "$tag"
}
finish() { cp "$LOGS/summary.txt" "$OUT/" 2>/dev/null; tar czf "$OUT/logs.tar.gz" -C "$LOGS" . 2>/dev/null; }
trap finish EXIT
# FLASHCHECK_DEADLINE=SECONDS: no ctest step (tests, tests-pending, sanitizer) starts a test later than that many seconds
# after this script started, and the tests running then stop (ctest --stop-time), so a call with a wall-clock limit
# still ends with its summary and logs. ctest_stop_args [STEP_SECONDS]: the --stop-time arguments, the earlier of the
# deadline and STEP_SECONDS from now (one argument per line; none without either).
script_start=$(date +%s)
ctest_stop_args() {
  local stop="" now
  now=$(date +%s)
  [[ -n "${1:-}" ]] && stop=$((now + $1))
  if [[ -n "${FLASHCHECK_DEADLINE:-}" ]]; then
    local deadline=$((script_start + FLASHCHECK_DEADLINE))
    [[ -z "$stop" || $deadline -lt $stop ]] && stop=$deadline
  fi
  # ctest reads a stop time already past as tomorrow's: a step the deadline has passed gets one second.
  [[ -n "$stop" && $stop -le $now ]] && stop=$((now + 1))
  [[ -n "$stop" ]] && printf '%s\n' --stop-time "$(date -d "@$stop" +%H:%M:%S)"
  return 0
}
# True once FLASHCHECK_DEADLINE has passed: the ctest steps then log that they did not run, and the run fails.
deadline_passed() { [[ -n "${FLASHCHECK_DEADLINE:-}" && $(date +%s) -ge $((script_start + FLASHCHECK_DEADLINE)) ]]; }

# The GPUs of this run: a CTest resource spec for the tests, one CUDA_VISIBLE_DEVICES value per GPU for
# the one-process-per-GPU steps.
slots=${FLASHCHECK_SLOTS_PER_GPU:-6}
spec="$LOGS/resource_spec.json"
bash ci/resource_spec.sh --gpus "$gpus_arg" --slots-per-gpu "$slots" -o "$spec" 2>"$LOGS/resource_spec.log" ||
  { cat "$LOGS/resource_spec.log" >&2; exit 2; }
gpu_count=$(bash ci/resource_spec.sh --gpus "$gpus_arg" --count 2>/dev/null)
mapfile -t gpu_list < <(bash ci/resource_spec.sh --gpus "$gpus_arg" --visible 2>/dev/null)
log "$(cat "$LOGS/resource_spec.log")"

# Every step named before the first runs: a typo after `build` would otherwise cost the whole build.
for step in "$@"; do
  case "$step" in
    build|tests|tests-pending|sanitizer|report|subjects|fuzz-wait|bench) ;;
    properties=*|budget=*|mutants=*|fuzz=*|fuzz-bg=*|mutant=*) ;;
    *) echo "unknown step '$step'" >&2; exit 2 ;;
  esac
done

for step in "$@"; do
  case "$step" in
    build)
      [ -d .devdeps ] && bash ci/devdeps.sh install
      log "build (gpu preset, $jobs jobs)"
      # libtorch (the SDPA subjects, the peers) from the Python torch package when there is one, and only for the
      # steps that run them: `subjects`, or FLASHCHECK_PEERS=1 (their tests, label peer, and the replays of the
      # peers' known deviations). They add about a minute of compile.
      torch_prefix=""
      if [[ "${FLASHCHECK_PEERS:-0}" == 1 || " $* " == *" subjects "* ]]; then
        torch_prefix=$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)
      fi
      { cmake --preset gpu ${torch_prefix:+-DCMAKE_PREFIX_PATH="$torch_prefix"} &&
        cmake --build --preset gpu -j "$jobs"; } >"$LOGS/build.log" 2>&1 \
        || { log "BUILD FAILED"; tail -50 "$LOGS/build.log"; exit 1; }
      grep -E "registers|spill" "$LOGS/build.log" | sort -u >"$LOGS/ptxas.txt" || true ;;
    tests|tests-pending|sanitizer)
      if deadline_passed; then log "$step: not run, FLASHCHECK_DEADLINE (${FLASHCHECK_DEADLINE} s) has passed"; status=1; continue; fi ;;&
    tests|tests-pending)
      ctest_jobs=${FLASHCHECK_CTEST_JOBS:-$((gpu_count * slots))}
      # `tests` runs the selection (ctest -L gpu and FLASHCHECK_CTEST_ARGS); `tests-pending` runs what the earlier runs
      # of this LOGS directory left pending: not started (FLASHCHECK_TESTS_STOP_AFTER), stopped at a timeout or failed
      # (ci/pending_tests.py over their JUnit files). Each run keeps its own -V log and JUnit file, and the property
      # summary reads them all, a later run's result replacing an earlier one's.
      filter_args=() what=""
      if [ "$step" = tests ]; then
        rm -f "$LOGS"/ctest_gpu.*.log "$LOGS"/ctest-junit.*.xml
        run_tag=0
        # shellcheck disable=SC2086
        ctest --preset gpu -N ${FLASHCHECK_CTEST_ARGS:-} >"$LOGS/tests_listing.txt" 2>&1
      else
        [ -f "$LOGS/tests_listing.txt" ] || { log "tests-pending: no earlier \`tests\` run in $LOGS"; status=1; continue; }
        # Without any ctest XML (a `tests` step stopped before ctest wrote one) every listed test is pending.
        junit=("$LOGS"/ctest-junit.*.xml)
        [ -e "${junit[0]}" ] || junit=()
        if ! regex=$(python3 ci/pending_tests.py --regex --listing "$LOGS/tests_listing.txt" "${junit[@]}"); then
          log "tests-pending: ci/pending_tests.py failed on $LOGS"
          status=1
          continue
        fi
        [ -n "$regex" ] || { log "tests-pending: no test pending"; continue; }
        filter_args=(-R "$regex")
        what=": the $(python3 ci/pending_tests.py --listing "$LOGS/tests_listing.txt" "${junit[@]}" | wc -l) pending tests"
        run_tag=${#junit[@]}
      fi
      log "ctest -L gpu on $gpu_count GPU(s), -j $ctest_jobs (resource spec $spec)$what"
      # -V keeps the output of passing tests too: the RC_CLASSIFY distribution of the GPU properties.
      # JUnit XML beside the build for CI dashboards; the skipped tests with their reasons in the summary.
      # Each GPU test holds one of the spec's GPU slots and runs on that GPU (RESOURCE_GROUPS gpus:1).
      start_t=$(date +%s)
      # FLASHCHECK_TESTS_STOP_AFTER=SECONDS: no test starts after that many seconds (ctest --stop-time; the ones
      # running then are stopped too), so a run with a wall-clock limit ends with its summary; `tests-pending` in a
      # later call runs what it left.
      mapfile -t stop_args < <(ctest_stop_args "${FLASHCHECK_TESTS_STOP_AFTER:-}")
      ctest_log="$LOGS/ctest_gpu.$run_tag.log"
      # FLASHCHECK_CTEST_ARGS adds ctest arguments (say -E subject_ after the subjects step ran them).
      # shellcheck disable=SC2086
      ctest --preset gpu -V -j "$ctest_jobs" --resource-spec-file "$spec" "${stop_args[@]}" ${FLASHCHECK_CTEST_ARGS:-} \
        "${filter_args[@]}" --output-junit "$PWD/build/gpu/ctest-junit.xml" >"$ctest_log" 2>&1 || status=1
      cp build/gpu/ctest-junit.xml "$LOGS/ctest-junit.$run_tag.xml" 2>/dev/null
      log "ctest -L gpu took $(( $(date +%s) - start_t )) s; GPU test binaries per GPU id:" \
        "$(grep -oE 'flashcheck: CTest GPU id [0-9]+' "$ctest_log" | awk '{print $NF}' | sort -n | uniq -c |
           awk '{printf "%s%s:%s", (NR > 1 ? " " : ""), $2, $1}')"
      grep -E "tests passed|tests failed|Total Test time|\*\*\*Failed|\*\*\*Skipped|\*\*\*Timeout" \
        "$ctest_log" | tail -25 | tee -a "$LOGS/summary.txt"
      python3 ci/skip_reasons.py build/gpu/ctest-junit.xml 2>&1 | tee -a "$LOGS/summary.txt"
      pending=$(python3 ci/pending_tests.py --listing "$LOGS/tests_listing.txt" "$LOGS"/ctest-junit.*.xml | wc -l)
      [ "$pending" -gt 0 ] && log "$pending of $(grep -cE 'Test +#' "$LOGS/tests_listing.txt") tests not passed yet" \
        "(not started, stopped or failed): ci/gpu_tier.sh tests-pending runs them"
      # shellcheck disable=SC2046
      python3 ci/classify_summary.py --prefix Gpu_Properties. $(ls -v "$LOGS"/ctest_gpu.*.log) 2>&1 |
        tee -a "$LOGS/summary.txt" ;;
    properties=*)
      # A long property run spread over the GPUs: each GPU property binary runs once per GPU, shard i of n on
      # GPU i, each its share of CASES per property from its own seed (FLASHCHECK_SHARD, properties/tier.h).
      # A failing shard lists its case lines; the replay command reruns that shard on any one GPU.
      cases="${step#properties=}"
      seed=${FLASHCHECK_SEED:-$(date -u +%Y%m%d)}
      n=${#gpu_list[@]}
      [ "$n" -eq 0 ] && { log "properties: no GPU found, skipped"; continue; }
      log "properties: $cases cases per property in $n shard(s), one per GPU, FLASHCHECK_SEED=$seed"
      for bin in build/gpu/properties/properties_gpu build/gpu/properties/properties_gpu_instrumented; do
        # properties_gpu must be there (a run of nothing is no pass); the instrumented one only in builds that have it.
        if [ ! -x "$bin" ]; then
          [ "$(basename "$bin")" = properties_gpu ] && { log "  $bin: not built (the build step builds it)"; status=1; }
          continue
        fi
        name=$(basename "$bin")
        start_t=$(date +%s)
        pids=()
        for ((i = 0; i < n; ++i)); do
          env CUDA_VISIBLE_DEVICES="${gpu_list[$i]}" FLASHCHECK_SHARD="$i/$n" FLASHCHECK_SEED="$seed" \
            FLASHCHECK_CASES="$cases" "$bin" >"$LOGS/$name.shard$i.log" 2>&1 & pids+=($!)
        done
        for ((i = 0; i < n; ++i)); do
          if wait "${pids[$i]}"; then
            log "  $name shard $i/$n (GPU ${gpu_list[$i]}): pass, $(grep -m1 -oE 'cases \[[0-9]+, [0-9]+\)' \
              "$LOGS/$name.shard$i.log") per property"
          else
            status=1
            log "  $name shard $i/$n (GPU ${gpu_list[$i]}): FAIL; the shard again on one GPU:" \
              "FLASHCHECK_SHARD=$i/$n FLASHCHECK_SEED=$seed FLASHCHECK_CASES=$cases $bin --gtest_filter=<test>;" \
              "a case line alone: build/gpu/tools/flashcheck-repro --backend gpu '<case line>'"
            grep -E "^\[  FAILED  \] [A-Za-z_]+\.[A-Za-z]+$|case line:" "$LOGS/$name.shard$i.log" | sort -u |
              head -20 | tee -a "$LOGS/summary.txt"
          fi
        done
        log "  $name: $n shard(s) in $(( $(date +%s) - start_t )) s"
      done ;;
    budget=*)
      secs="${step#budget=}"
      log "budgeted tier: every GPU property within ${secs}s"
      for bin in build/gpu/properties/properties_gpu build/gpu/properties/properties_gpu_instrumented; do
        # properties_gpu must be there (a run of nothing is no pass); the instrumented one only in builds that have it.
        if [ ! -x "$bin" ]; then
          [ "$(basename "$bin")" = properties_gpu ] && { log "  $bin: not built (the build step builds it)"; status=1; }
          continue
        fi
        name=$(basename "$bin")
        # The instrumented binary holds one property: a tenth of the budget.
        share=$secs; [ "$name" = properties_gpu_instrumented ] && share=$(( secs / 10 > 5 ? secs / 10 : 5 ))
        FLASHCHECK_BUDGET="${share}s" "$bin" --gtest_filter='*.Budgeted' >"$LOGS/$name.budget.log" 2>&1 || status=1
        grep -E "^\[ BUDGET   \]|^\[  (PASSED|FAILED) |case line:|reproduce=" "$LOGS/$name.budget.log" |
          tee -a "$LOGS/summary.txt"
      done ;;
    mutants=*)
      # The suite on its own mutants (tools/mutation_test.py): build preset gpu-mutants, then the budgeted tier
      # on every mutant of the catalogue, SECONDS each; the kill table in $OUT/mutation.md and .json.
      secs="${step#mutants=}"
      [ -d .devdeps ] && bash ci/devdeps.sh install
      log "mutation testing: build gpu-mutants, then the budgeted tier for ${secs}s per mutant"
      { cmake --preset gpu-mutants && cmake --build --preset gpu-mutants -j "$jobs"; } >"$LOGS/build-mutants.log" 2>&1 \
        || { log "BUILD FAILED (gpu-mutants)"; tail -50 "$LOGS/build-mutants.log"; exit 1; }
      # The catalogue split over the run's GPUs (--gpus), one part per GPU at once, then one table.
      gpu_env=()
      [ "${#gpu_list[@]}" -gt 0 ] && gpu_env=(CUDA_VISIBLE_DEVICES="$(IFS=,; echo "${gpu_list[*]}")")
      env "${gpu_env[@]}" python3 tools/mutation_test.py --build build/gpu-mutants --budget "$secs" \
        --gpus "${#gpu_list[@]}" ${FLASHCHECK_MUTATION_ARGS:-} --markdown "$OUT/mutation.md" --json "$OUT/mutation.json" \
        2>&1 | tee "$LOGS/mutation.log" | grep -E "^\[" | tee -a "$LOGS/summary.txt" || status=1 ;;
    report)
      log "verification report on the GPU kernel (flashcheck-report)"
      build/gpu/tools/flashcheck-report --backend gpu >"$LOGS/report.txt" 2>&1 || status=1
      # The tables (per dtype, per feature), the worst cases and the verdict line; not the progress lines.
      grep -E "^(\||worst |(FAIL|PASS|UNSUPPORTED|OUTSIDE|INCOMPLETE)[A-Z-]*( within capabilities| \([^)]*\))?: )" "$LOGS/report.txt" | tee -a "$LOGS/summary.txt" ;;
    subjects)
      # Every subject beside flashcheck's kernel, all at once (the oracle's threads split between them):
      # flashcheck-report --json and properties_gpu --gtest_output=xml per subject, then one table.
      sdir="$LOGS/subjects"; mkdir -p "$sdir"
      cases=${FLASHCHECK_SUBJECT_CASES:-100} random=${FLASHCHECK_SUBJECT_RANDOM:-100}
      limit=${FLASHCHECK_SUBJECT_TIMEOUT:-}
      libs=(build/gpu/subjects/example/libflashcheck_subject_example.so build/gpu/subjects/sdpa/libflashcheck_subject_sdpa_*.so)
      names=(flashcheck)
      for lib in "${libs[@]}"; do [ -f "$lib" ] && names+=("$PWD/$lib"); done
      # Kernels written in Python (the bridge built, and what each imports there): the Triton example, FlexAttention,
      # FlashAttention-3 (the fa3-fwd wheel on PYTHONPATH).
      export PYTHONPATH="$PWD/subjects/python${PYTHONPATH:+:$PYTHONPATH}"
      if [ -f build/gpu/subjects/libflashcheck_subject_python.so ]; then
        for spec in triton_attention:triton flex_attention:torch.nn.attention.flex_attention fa3_attention:fa3_fwd_interface; do
          python3 -c "import ${spec#*:}" 2>/dev/null && names+=("python:${spec%%:*}:attention") ||
            log "subjects: python:${spec%%:*}:attention left out (${spec#*:} does not import)"
        done
      fi
      # FLASHCHECK_SUBJECTS=tag,...: only these (the tags of the logs: flashcheck, example, sdpa_flash, triton_attention,
      # ...); the table still takes every subject's results in this logs folder, so a run split over calls (the slow
      # Python peers in a call of their own, on the same machine) ends with one table.
      if [ -n "${FLASHCHECK_SUBJECTS:-}" ]; then
        kept=()
        for lib in "${names[@]}"; do
          [[ ",$FLASHCHECK_SUBJECTS," == *",$(subject_tag "$lib"),"* ]] && kept+=("$lib")
        done
        names=(${kept[@]+"${kept[@]}"})
        [ "${#names[@]}" -eq 0 ] && { log "subjects: none of FLASHCHECK_SUBJECTS=$FLASHCHECK_SUBJECTS is built here"; status=1; continue; }
      fi
      threads=$(( jobs / ${#names[@]} > 1 ? jobs / ${#names[@]} : 1 ))
      log "subjects: ${#names[@]} (report: sweep + random; properties: $cases cases each; $threads oracle threads each)"
      start_t=$(date +%s)
      pids=()
      for lib in "${names[@]}"; do
        tag=$(subject_tag "$lib")
        if [ "$lib" = flashcheck ]; then
          subject_args=(--backend gpu --random "$random" --random-features "$((random / 2))"); subject_env=(); else
          subject_args=(--subject "$lib" --random "$random" --random-features "$((random / 2))")
          subject_env=(FLASHCHECK_SUBJECT="$lib"); fi
        ( export OMP_NUM_THREADS=$threads
          subject_start=$(date +%s)
          ${limit:+timeout "$limit"} build/gpu/tools/flashcheck-report "${subject_args[@]}" --json "$sdir/$tag.json" \
            >"$sdir/$tag.report.txt" 2>&1
          # The property run: what the report left of the limit (at least 30 s), new properties until three quarters
          # of it, then killed at the limit.
          properties_limit=()
          if [ -n "$limit" ]; then
            left=$(( limit - ($(date +%s) - subject_start) )); [ "$left" -lt 30 ] && left=30
            properties_limit=(timeout "$left")
            subject_env+=(FLASHCHECK_STOP_AFTER="$(( left * 3 / 4 ))")
          fi
          # The classes of known peer deviations the property tier discards on this subject (by the name it declares,
          # from the report).
          who=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("subject") or "")' "$sdir/$tag.json" 2>/dev/null)
          known=$(cat subjects/*/known_deviations.txt | awk -v who="$who" '$1 == who {print $2}' | sort -u | paste -sd, -)
          env ${subject_env[@]+"${subject_env[@]}"} FLASHCHECK_KNOWN_DEVIATIONS="$known" FLASHCHECK_CASES="$cases" \
            ${properties_limit[@]+"${properties_limit[@]}"} build/gpu/properties/properties_gpu \
            --gtest_output=xml:"$sdir/$tag.xml" >"$sdir/$tag.properties.txt" 2>&1
        ) & pids+=($!)
      done
      wait "${pids[@]}"
      log "subjects took $(( $(date +%s) - start_t )) s"
      table_args=()
      for json in $(ls "$sdir"/flashcheck.json 2>/dev/null) $(ls "$sdir"/*.json 2>/dev/null | grep -v '/flashcheck.json$'); do
        tag=$(basename "$json" .json)
        name=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("subject") or "flashcheck")' "$json")
        table_args+=("$json")
        [ -f "$sdir/$tag.xml" ] && table_args+=(--properties "$name=$sdir/$tag.xml")
        grep -E "^(FAIL|PASS|UNSUPPORTED|OUTSIDE|INCOMPLETE)[A-Z-]*( within capabilities| \([^)]*\))?: " "$sdir/$tag.report.txt" | tail -1 | sed "s/^/  $tag report: /" |
          tee -a "$LOGS/summary.txt"
        grep -E "^\[  (PASSED|FAILED|SKIPPED) +\]|case line:" "$sdir/$tag.properties.txt" | sort -u | head -12 |
          sed "s/^/  $tag properties: /" | tee -a "$LOGS/summary.txt"
      done
      if [ "${#table_args[@]}" -gt 0 ]; then
        python3 tools/subject_table.py "${table_args[@]}" | tee "$OUT/subjects.md" | tee -a "$LOGS/summary.txt"
      else
        log "subjects: no report JSON in $sdir: no table"; status=1
      fi ;;
    sanitizer)
      # Each sanitizer test holds a GPU slot (RESOURCE_GROUPS gpus:1), FLASHCHECK_SANITIZER_PER_GPU (default 2)
      # at a time per GPU: on two H200s the 13 tests (449 s one after another) take 161 s.
      san_jobs=$((gpu_count * ${FLASHCHECK_SANITIZER_PER_GPU:-2}))
      start_t=$(date +%s)
      log "ctest -L sanitizer on $gpu_count GPU(s), -j $san_jobs"
      mapfile -t stop_args < <(ctest_stop_args "")
      ctest --preset sanitizer -j "$san_jobs" --resource-spec-file "$spec" --output-on-failure "${stop_args[@]}" \
        >"$LOGS/ctest_sanitizer.log" 2>&1 || status=1
      log "ctest -L sanitizer took $(( $(date +%s) - start_t )) s"
      tail -15 "$LOGS/ctest_sanitizer.log" | tee -a "$LOGS/summary.txt" ;;
    fuzz=*)
      secs="${step#fuzz=}"
      log "nightly fuzz for ${secs}s"
      bash ci/nightly_fuzz.sh --gpus "$gpus_arg" "$secs" "$LOGS/fuzz" >"$LOGS/fuzz.log" 2>&1 || status=1
      tail -30 "$LOGS/fuzz.log" | tee -a "$LOGS/summary.txt" ;;
    fuzz-bg=*)
      # The nightly fuzz script in the background (one fuzz_kernel worker per GPU plus the CPU targets), so
      # the other steps, and a later call, can run while it fuzzes; `fuzz-wait` collects it.
      secs="${step#fuzz-bg=}"
      log "nightly fuzz for ${secs}s in the background"
      setsid nohup bash ci/nightly_fuzz.sh --gpus "$gpus_arg" "$secs" "$LOGS/fuzz" >"$LOGS/fuzz.log" 2>&1 < /dev/null &
      echo $! >"$LOGS/fuzz.pid" ;;
    fuzz-wait)
      if [ -f "$LOGS/fuzz.pid" ]; then
        while kill -0 "$(cat "$LOGS/fuzz.pid")" 2>/dev/null; do sleep 5; done
      fi
      log "nightly fuzz finished"
      cat "$LOGS/fuzz/summary.md" 2>/dev/null | head -60 | tee -a "$LOGS/summary.txt"
      grep -q "findings: 0\|no findings" "$LOGS/fuzz/summary.md" 2>/dev/null || true ;;
    mutant=*)
      # The planted kernel bug (fuzz_kernel_mutant, mutant general-missing-rescale) from an empty corpus:
      # how long the fuzzer takes to find it, then the finding replayed on the real kernel (must pass) and
      # on the host model with the twin defect (must fail).
      secs="${step#mutant=}"
      mutant_bin=$(find "${FLASHCHECK_FUZZ_BUILD:-build/fuzz}" -type f -name fuzz_kernel_mutant -perm -u+x | head -1)
      mdir="$LOGS/mutant"; mkdir -p "$mdir/corpus"
      log "planted kernel bug: $mutant_bin for at most ${secs}s"
      start_m=$(date +%s)
      # As the nightly run fuzzes: the case-line dictionary, per-input time and memory limits.
      "$mutant_bin" -max_total_time="$secs" -timeout=30 -rss_limit_mb=4096 -dict=fuzz/dict/fuzz_kernel.dict \
        -artifact_prefix="$mdir/" -print_final_stats=1 "$mdir/corpus" >"$mdir/fuzz.log" 2>&1
      log "mutant fuzzer stopped after $(( $(date +%s) - start_m )) s; $(ls "$mdir"/finding-*.case 2>/dev/null | wc -l) finding(s)"
      grep -E "^#[0-9]+.*(pulse|DONE|NEW)|exec/s|finding|stat::" "$mdir/fuzz.log" | tail -6 | tee -a "$LOGS/summary.txt"
      for f in "$mdir"/finding-*.case; do
        [ -f "$f" ] || continue
        echo "finding: $(grep -v '^#' "$f" | head -1)" | tee -a "$LOGS/summary.txt"
        build/gpu/tools/flashcheck-repro --backend gpu --file "$f" >"$mdir/replay_real.txt" 2>&1
        echo "  replay on the real kernel: exit $? ($(grep -m1 verdict "$mdir/replay_real.txt"))" | tee -a "$LOGS/summary.txt"
        build/gpu/tools/flashcheck-repro --backend model --defect missing-rescale --file "$f" >"$mdir/replay_defect.txt" 2>&1
        echo "  replay on the host model with the twin defect: exit $? ($(grep -m1 verdict "$mdir/replay_defect.txt"))" | tee -a "$LOGS/summary.txt"
        "$mutant_bin" "$f" >"$mdir/replay_mutant.txt" 2>&1
        echo "  replay on the mutant: exit $?" | tee -a "$LOGS/summary.txt"
        break
      done ;;
    bench)
      log "bench"
      bash bench/run_bench.sh build/gpu "$LOGS/bench" --only forward >"$LOGS/bench.log" 2>&1 || status=1
      tail -40 "$LOGS/bench.log" | tee -a "$LOGS/summary.txt" ;;
    *) echo "unknown step '$step'" >&2; exit 2 ;;
  esac
done
log "gpu tier exit status $status"
exit "$status"
