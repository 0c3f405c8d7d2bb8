#!/usr/bin/env bash
# Overnight fuzzing: fuzz_kernel once per size profile (targets fuzz_kernel:small and fuzz_kernel:medium,
# FLASHCHECK_FUZZ_PROFILE, fuzz/README.md), each with several workers on every GPU (each worker its own process
# and CUDA_VISIBLE_DEVICES; --gpus N|all picks the first N GPUs ci/resource_spec.sh finds, default all): a small
# case keeps the GPU busy for well under a millisecond and its host side (input generation, the oracle's rows)
# for a few, so the GPU's rate comes from processes sharing it. The CPU targets (fuzz_model, fuzz_backward, fuzz_api,
# fuzz_case) run on the remaining cores. All workers of a target share one corpus directory that libFuzzer reloads (-reload=1) and
# one findings directory. A worker that stops on a finding is restarted for the rest of the budget. While they
# run, a one-line status every FLASHCHECK_FUZZ_STATUS_SECONDS (default 60). At the end the corpora are merged
# (-merge=1) and OUTDIR/summary.md lists per target the executions per second, the features (libFuzzer's
# cov/ft) and their gain per second, the corpus size, the rate of each GPU worker, fuzz_kernel's time per stage,
# and every finding with its case line (replayable on one GPU with flashcheck-repro); OUTDIR/summary.json holds
# the same for dashboards (schema in fuzz/README.md, "Nightly summary JSON").
#
#   ci/nightly_fuzz.sh [--gpus N|all] BUDGET_SECONDS OUTDIR
#
# Environment: FLASHCHECK_FUZZ_BUILD (build dir of the CPU targets, default build/fuzz; configured with the fuzz
# preset and built here unless FLASHCHECK_FUZZ_NO_BUILD=1), FLASHCHECK_FUZZ_KERNEL_BUILD (build dir of fuzz_kernel,
# default build/fuzz-kernel, or FLASHCHECK_FUZZ_BUILD with FLASHCHECK_FUZZ_NO_BUILD=1: the fuzz preset with
# FLASHCHECK_FUZZ_SANITIZE empty, libFuzzer's coverage without ASan and UBSan, which multiply the host side's time
# by 3 to 6; fuzz_model and fuzz_api keep them on the same host code), FLASHCHECK_FUZZ_PROFILES (fuzz_kernel's
# size profiles, default "small medium"; "all" is the unbounded one), FLASHCHECK_FUZZ_KERNEL_WORKERS (workers per
# profile per GPU; default: three quarters of the cores per GPU, split over the profiles with small weighing twice
# the others, at least 1 each), FLASHCHECK_FUZZ_CORPUS (a corpus directory kept between nights, default
# OUTDIR/corpus), FLASHCHECK_FUZZ_CPU_WORKERS (workers per CPU target; default: the cores left after the GPU
# workers, split between the CPU targets, at least 1 each), FLASHCHECK_FUZZ_MERGE_SECONDS (the time limit of
# each target's corpus merge after the budget, default 300; the targets merge at once), FLASHCHECK_FUZZ_CPU_TARGETS
# (the CPU targets to run, default "fuzz_model fuzz_backward fuzz_api fuzz_case"; empty: none, for a GPU machine that has fuzz_kernel alone,
# e.g. where a copy of the packed binaries is capped in size: ci/pack_fuzz_bins.sh).
# Exit status: 0 with no finding, 1 with findings, 2 on a usage or build error or a worker that could not fuzz.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

usage() {
  cat <<'USAGE'
usage: ci/nightly_fuzz.sh [--gpus N|all] BUDGET_SECONDS OUTDIR
  fuzz_kernel per size profile (fuzz_kernel:small, fuzz_kernel:medium; several workers per GPU, shared corpus and
  findings per target) and the CPU targets on the remaining cores for BUDGET_SECONDS, a status line every minute,
  then merge the corpora and write OUTDIR/summary.md and OUTDIR/summary.json (executions/s and features gained
  per second per target, per GPU worker, corpus size, every finding with its case line and replay command; JSON
  schema in fuzz/README.md).
  --gpus N|all   the first N GPUs, or all of them (default; ci/resource_spec.sh --visible finds them)
environment: FLASHCHECK_FUZZ_BUILD, FLASHCHECK_FUZZ_KERNEL_BUILD, FLASHCHECK_FUZZ_NO_BUILD=1, FLASHCHECK_FUZZ_PROFILES,
  FLASHCHECK_FUZZ_KERNEL_WORKERS, FLASHCHECK_FUZZ_CORPUS, FLASHCHECK_FUZZ_CPU_WORKERS, FLASHCHECK_FUZZ_CPU_TARGETS
  (default "fuzz_model fuzz_backward fuzz_api fuzz_case"; empty: fuzz_kernel alone),
  FLASHCHECK_FUZZ_STATUS_SECONDS (status line period, default 60; 0: none), FLASHCHECK_FUZZ_MERGE_SECONDS (each
  target's corpus merge after the budget, default 300; one that runs out keeps its corpus unmerged)
exit status: 0 no finding, 1 findings, 2 usage or build error, or a worker that could not fuzz (logs/*.nostart)
USAGE
}
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  usage
  exit 0
fi
gpus_arg=all
case "${1:-}" in
  --gpus) gpus_arg=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
  --gpus=*) gpus_arg=${1#--gpus=}; shift ;;
esac
if [ $# -ne 2 ] || ! [[ $1 =~ ^[0-9]+$ ]] || ! [[ $gpus_arg == all || $gpus_arg =~ ^[1-9][0-9]*$ ]]; then
  usage >&2
  exit 2
fi
budget=$1
read -r -a cpu_targets <<<"${FLASHCHECK_FUZZ_CPU_TARGETS-fuzz_model fuzz_backward fuzz_api fuzz_case}"
for t in "${cpu_targets[@]}"; do
  [[ $t == fuzz_model || $t == fuzz_backward || $t == fuzz_api || $t == fuzz_case ]] ||
    { echo "nightly_fuzz.sh: FLASHCHECK_FUZZ_CPU_TARGETS: unknown target '$t' (fuzz_model, fuzz_backward, fuzz_api, fuzz_case)" >&2; exit 2; }
done
out=$(mkdir -p "$2" && cd "$2" && pwd) && [ -n "$out" ] ||
  { echo "nightly_fuzz.sh: cannot create the output folder '$2'" >&2; exit 2; }
build=${FLASHCHECK_FUZZ_BUILD:-$root/build/fuzz}
kernel_build=${FLASHCHECK_FUZZ_KERNEL_BUILD:-$root/build/fuzz-kernel}
# Prebuilt binaries (FLASHCHECK_FUZZ_NO_BUILD=1) without a kernel build of their own: fuzz_kernel lies beside the rest.
[ "${FLASHCHECK_FUZZ_NO_BUILD:-0}" = 1 ] && [ -z "${FLASHCHECK_FUZZ_KERNEL_BUILD:-}" ] && kernel_build=$build
read -r -a profiles <<<"${FLASHCHECK_FUZZ_PROFILES:-small medium}"
corpus_root=${FLASHCHECK_FUZZ_CORPUS:-$out/corpus}
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"

# One CUDA_VISIBLE_DEVICES value per GPU (none without a GPU): worker g fuzzes on gpu_list[g] alone.
gpu_list=()
if ! gpu_text=$(bash "$root/ci/resource_spec.sh" --gpus "$gpus_arg" --visible 2>"$out/resource_spec.log"); then
  echo "nightly_fuzz.sh: $(cat "$out/resource_spec.log")" >&2
  exit 2
fi
[ -n "$gpu_text" ] && mapfile -t gpu_list <<<"$gpu_text"
gpus=${#gpu_list[@]}
# Targets by file-safe name: fuzz_kernel-PROFILE (shown as fuzz_kernel:PROFILE), fuzz_model, fuzz_backward, fuzz_api,
# fuzz_case.
kernel_targets=()
if [ "$gpus" -gt 0 ]; then
  for p in "${profiles[@]}"; do
    [[ $p == small || $p == medium || $p == all ]] || { echo "nightly_fuzz.sh: unknown profile '$p'" >&2; exit 2; }
    kernel_targets+=("fuzz_kernel-$p")
  done
fi
targets=("${kernel_targets[@]}" "${cpu_targets[@]}")
if [ ${#targets[@]} -eq 0 ]; then
  echo "nightly_fuzz.sh: nothing to fuzz: no GPU for fuzz_kernel and FLASHCHECK_FUZZ_CPU_TARGETS is empty" >&2
  exit 2
fi
shown() { case $1 in fuzz_kernel-*) echo "fuzz_kernel:${1#fuzz_kernel-}" ;; *) echo "$1" ;; esac; }
profile_of() { case $1 in fuzz_kernel-*) echo "${1#fuzz_kernel-}" ;; esac; }

# build_in DIR LOG_STEM CONFIGURE_ARGS... -- TARGETS...: configure DIR with the fuzz preset if needed, build TARGETS.
build_in() {
  local dir=$1 stem=$2; shift 2
  local configure=()
  while [ "$1" != -- ]; do configure+=("$1"); shift; done
  shift
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    cmake --preset fuzz -B "$dir" "${configure[@]}" >"$out/$stem-configure.log" 2>&1 ||
      { echo "configure failed: $out/$stem-configure.log" >&2; return 1; }
  fi
  cmake --build "$dir" -j "$(nproc)" --target "$@" >"$out/$stem-build.log" 2>&1 ||
    { echo "build failed: $out/$stem-build.log" >&2; return 1; }
}
if [ "${FLASHCHECK_FUZZ_NO_BUILD:-0}" != 1 ]; then
  build_in "$build" cpu -- "${cpu_targets[@]}" flashcheck-fuzz-decode || exit 2
  if [ ${#kernel_targets[@]} -gt 0 ]; then
    build_in "$kernel_build" kernel -DFLASHCHECK_FUZZ_SANITIZE= -- fuzz_kernel || exit 2
  fi
fi
build=$(cd "$build" && pwd)
[ ${#kernel_targets[@]} -gt 0 ] && kernel_build=$(cd "$kernel_build" && pwd)
# The commit the summary reports: prebuilt binaries name theirs (COMMIT, ci/pack_fuzz_bins.sh), else this tree's
# ("-dirty": local changes, or a working tree copied beside an old .git).
commit=$(git describe --always --dirty 2>/dev/null || echo unknown)
stamp=$(find "$build" -maxdepth 2 -name COMMIT -type f 2>/dev/null | head -1)
if [ "${FLASHCHECK_FUZZ_NO_BUILD:-0}" = 1 ] && [ -n "$stamp" ]; then
  commit="$(head -1 "$stamp") (prebuilt binaries)"
fi
# binary TARGET: the executable a target runs (fuzz_kernel-* run fuzz_kernel of the kernel build), the shallowest
# of that name in the build directory (a test's scratch copies lie deeper).
binary() {
  local dir=$build name=$1
  case $1 in fuzz_kernel-*) dir=$kernel_build name=fuzz_kernel ;; esac
  find "$dir" -type f -name "$name" -perm -u+x -printf '%d %p\n' | sort -n | head -1 | cut -d' ' -f2-
}
dict_of() { case $1 in fuzz_kernel-*) echo fuzz_kernel ;; *) echo "$1" ;; esac; }

cores=$(nproc)
# fuzz_kernel workers per GPU of each profile target: three quarters of the cores per GPU, split by weight, small 2
# and the others 1. A medium case costs the host about 3.5 times a small one and its target rate is a tenth
# (fuzz/README.md): with equal shares medium ran at twice its rate and small short of its own.
declare -A workers_of=()
kernel_workers=0 kernel_threads=1  # workers per GPU over all profiles; the oracle's threads (OpenMP) of each
if [ ${#kernel_targets[@]} -gt 0 ]; then
  weight_of() { case $1 in fuzz_kernel-small) echo 2 ;; *) echo 1 ;; esac; }
  total_weight=0
  for t in "${kernel_targets[@]}"; do total_weight=$((total_weight + $(weight_of "$t"))); done
  for t in "${kernel_targets[@]}"; do
    n=${FLASHCHECK_FUZZ_KERNEL_WORKERS:-$(( cores * 3 / 4 / gpus * $(weight_of "$t") / total_weight ))}
    [ "$n" -lt 1 ] && n=1
    workers_of[$t]=$n
    kernel_workers=$((kernel_workers + n))
  done
  kernel_threads=$(( cores * 3 / 4 / (gpus * kernel_workers) ))
  [ "$kernel_threads" -lt 1 ] && kernel_threads=1
fi
# "small 8, medium 4": the split, for the log and the summary.
worker_split=$(for t in "${kernel_targets[@]}"; do printf '%s %s, ' "$(profile_of "$t")" "${workers_of[$t]}"; done)
worker_split=${worker_split%, }
all_kernel_workers=$(( gpus * kernel_workers ))
cpu_workers=0
if [ ${#cpu_targets[@]} -gt 0 ]; then
  cpu_workers=${FLASHCHECK_FUZZ_CPU_WORKERS:-$(( (cores - all_kernel_workers * kernel_threads) / ${#cpu_targets[@]} ))}
  [ "$cpu_workers" -lt 1 ] && cpu_workers=1
fi

mkdir -p "$out/logs" "$out/findings"
rm -f "$out"/logs/*.nostart "$out"/logs/*.unmerged  # an earlier night's, in a reused OUTDIR
for t in "${targets[@]}"; do
  mkdir -p "$corpus_root/$t" "$out/findings/$t"
done

deadline=$(( $(date +%s) + budget ))
# fuzz_case holds every case line to a second (a slower one is its finding), and to a GB (rss_for).
timeout_for() { case $1 in fuzz_kernel*) echo 120 ;; fuzz_model | fuzz_backward) echo 60 ;; fuzz_case) echo 1 ;; *) echo 20 ;; esac; }
rss_for() { case $1 in fuzz_case) echo 1024 ;; *) echo 8192 ;; esac; }

# worker TARGET NAME [VAR=VALUE...]: fuzz until the deadline, restarting after each finding. A run that ends
# before libFuzzer started (no "INFO: Seed:" line: a missing binary or shared library, a bad flag), or whose device
# could not draw a case's inputs (fuzz_kernel's exit 79), is not retried:
# its last line goes to logs/NAME.nostart, and the night ends with exit status 2.
worker() {
  local target=$1 name=$2; shift 2
  local bin log runs=0 lines
  bin=$(binary "$target")
  log="$out/logs/$name.log"
  : >"$log"
  while :; do
    local left=$(( deadline - $(date +%s) ))
    [ "$left" -lt 5 ] && break
    runs=$((runs + 1))
    echo "=== run $runs of $name: ${left}s left" >>"$log"
    lines=$(wc -l <"$log")
    env "$@" "$bin" -max_total_time="$left" -reload=1 -timeout="$(timeout_for "$target")" -rss_limit_mb="$(rss_for "$target")" \
      -print_final_stats=1 -artifact_prefix="$out/findings/$target/" -dict="$root/fuzz/dict/$(dict_of "$target").dict" \
      "$corpus_root/$target" "$root/fuzz/corpus/$(dict_of "$target")" >>"$log" 2>&1
    local rc=$?
    echo "=== exit $rc" >>"$log"
    [ "$rc" -eq 0 ] && break  # time is up (or no device after all: the target says so and exits 0)
    # fuzz_kernel's device could not draw a case's inputs (exit 79): no case is to blame, and a restart would fail
    # the same way; the worker is listed with those that could not fuzz.
    if [ "$rc" -eq 79 ]; then
      local why
      why=$(grep -m1 'drawing the inputs on the device failed' "$log" || echo 'the device could not draw inputs')
      echo "${bin}: exit 79: $why" >"$out/logs/$name.nostart"
      break
    fi
    # (awk reads the log itself: a pipe into an early-exiting grep would fail under pipefail on a long log)
    if ! awk -v from="$((lines + 1))" 'NR >= from && /^INFO: Seed:/ {found = 1; exit} END {exit !found}' "$log"; then
      echo "${bin:-$target (no binary)}: exit $rc before fuzzing: $(awk -v from="$((lines + 1))" \
        'NR >= from && !/^=== / && NF {print; found = 1; exit} END {if (!found) print "no output"}' "$log")" \
        >"$out/logs/$name.nostart"
      break
    fi
    sleep 1
  done
}

echo "flashcheck nightly fuzz: ${budget}s, $gpus GPU(s) with $kernel_workers fuzz_kernel worker(s) each" \
  "(${worker_split:-none}; $kernel_threads oracle thread(s) each), $cpu_workers worker(s) per CPU target, output $out"
pids=()
for t in "${kernel_targets[@]}"; do
  for ((g = 0; g < gpus; ++g)); do
    for ((w = 0; w < workers_of[$t]; ++w)); do
      worker "$t" "$t-gpu$g-w$w" CUDA_VISIBLE_DEVICES="${gpu_list[$g]}" FLASHCHECK_FUZZ_PROFILE="$(profile_of "$t")" \
        OMP_NUM_THREADS="$kernel_threads" FLASHCHECK_FUZZ_TIMING=1 & pids+=($!)
    done
  done
done
for t in "${cpu_targets[@]}"; do
  for ((w = 0; w < cpu_workers; ++w)); do
    worker "$t" "$t-cpu$w" CUDA_VISIBLE_DEVICES= & pids+=($!)
  done
done

# executions LOG: the worker's executions so far (finished runs' totals plus the current run's last "#N").
executions() {
  awk '/^=== run / {run = 0} /^stat::number_of_executed_units/ {done += $NF; run = 0}
       /^#[0-9]+/ {run = substr($1, 2) + 0} END {print done + run}' "$1" 2>/dev/null || echo 0
}
# One status line per period while the workers run: elapsed, executions and rate per target, findings.
status_every=${FLASHCHECK_FUZZ_STATUS_SECONDS:-60}
if [[ $status_every =~ ^[1-9][0-9]*$ ]]; then
  (
    start=$(date +%s)
    while sleep "$status_every"; do
      now=$(date +%s)
      [ "$now" -ge "$deadline" ] && break
      line="fuzz: $((now - start))/${budget}s"
      for t in "${targets[@]}"; do
        n=0 execs=0
        for log in "$out"/logs/"$t"-*[0-9].log; do
          [ -f "$log" ] || continue
          n=$((n + 1)) execs=$((execs + $(executions "$log")))
        done
        [ "$n" -gt 0 ] && line+=", $(shown "$t") x$n $execs execs ($((execs / (now - start + 1)))/s)"
      done
      line+=", findings $(find "$out/findings" -name 'finding-*.case' -o -name 'crash-*' -o -name 'timeout-*' \
        -o -name 'oom-*' -o -name 'leak-*' 2>/dev/null | wc -l)"
      echo "$line"
    done
  ) &
  status_pid=$!
fi
wait "${pids[@]}"
[ -n "${status_pid:-}" ] && kill "$status_pid" 2>/dev/null

# Merge: keep the inputs that carry distinct features (the GPU target needs a device for it). The targets merge at
# once, each within FLASHCHECK_FUZZ_MERGE_SECONDS (default 300): a GPU target's merge runs every input through the
# kernel and the oracle again, minutes for a night's corpus, and the summary must come a bounded time after the
# budget. A merge that fails or runs out leaves the corpus as the workers left it (logs/TARGET.unmerged: its exit
# status, 124 for the time limit).
merge_seconds=${FLASHCHECK_FUZZ_MERGE_SECONDS:-300}
merge_target() {
  local t=$1 bin merged rc
  bin=$(binary "$t")
  merged="$corpus_root/$t.merged"
  rm -rf "$merged" && mkdir -p "$merged"
  timeout "$merge_seconds" env CUDA_VISIBLE_DEVICES="$( [ -n "$(profile_of "$t")" ] && echo "${gpu_list[0]}")" \
    FLASHCHECK_FUZZ_PROFILE="$(profile_of "$t")" "$bin" -merge=1 -timeout="$(timeout_for "$t")" -artifact_prefix="$out/findings/$t/" \
    "$merged" "$corpus_root/$t" >"$out/logs/$t-merge.log" 2>&1
  rc=$?
  if [ "$rc" -eq 0 ]; then
    rm -rf "$corpus_root/$t" && mv "$merged" "$corpus_root/$t"
  else
    rm -rf "$merged"
    echo "$rc" >"$out/logs/$t.unmerged"
  fi
}
merges=()
for t in "${targets[@]}"; do
  merge_target "$t" & merges+=($!)
done
wait "${merges[@]}"

# Findings: a verdict finding leaves finding-<hash>.case (+ .txt) and libFuzzer's crash-<sha1> of the same
# input; the crash file is listed with its finding. Other crash/leak/timeout/oom files stand alone.
decode=$(binary flashcheck-fuzz-decode)
declare -A count
findings_md=""
# The same as tab-separated rows for summary.json: target, file, kind, case line, message, replay command.
findings_tsv="$out/logs/findings.tsv"
: >"$findings_tsv"
tsv_row() { local IFS=$'\t' f; local fields=(); for f in "$@"; do fields+=("$(tr '\t\n' '  ' <<<"$f" | sed 's/ $//')"); done; echo "${fields[*]}"; }
for t in "${targets[@]}"; do
  backend=model; [ -n "$(profile_of "$t")" ] && backend=gpu
  name=$(shown "$t")
  declare -A seen=()
  n=0
  for f in "$out/findings/$t"/finding-*.case; do
    [ -f "$f" ] || continue
    n=$((n + 1)); seen["$(head -1 "$f")"]=1
    findings_md+="- \`$name\` $(basename "$f"): \`$(head -1 "$f")\`"$'\n'
    findings_md+="  - $(grep -m1 -vE '^(target|backend|case):|^$' "${f%.case}.txt" 2>/dev/null)"$'\n'
    findings_md+="  - replay: \`flashcheck-repro --backend $backend --file $f\`"$'\n'
    tsv_row "$name" "$f" verdict "$(head -1 "$f")" "$(grep -m1 -vE '^(target|backend|case):|^$' "${f%.case}.txt" 2>/dev/null)" \
      "flashcheck-repro --backend $backend --file $f" >>"$findings_tsv"
  done
  for f in "$out/findings/$t"/{crash,leak,timeout,oom}-*; do
    [ -f "$f" ] || continue
    line=""
    # A binary input decodes to its case under the profile it ran with.
    [ "$t" != fuzz_api ] && [ -n "$decode" ] && line=$(FLASHCHECK_FUZZ_PROFILE="$(profile_of "$t")" "$decode" "$f" 2>/dev/null)
    [ -n "$line" ] && [ -n "${seen[$line]:-}" ] && continue
    n=$((n + 1))
    replay="$(binary "$t") $f"
    [ -n "$(profile_of "$t")" ] && replay="FLASHCHECK_FUZZ_PROFILE=$(profile_of "$t") $replay"
    findings_md+="- \`$name\` $(basename "$f") (sanitizer report, crash, timeout or out-of-memory; see logs/$t-*.log)${line:+: \`$line\`}"$'\n'
    findings_md+="  - replay: \`$replay\`"$'\n'
    kind=$(basename "$f"); kind=${kind%%-*}
    tsv_row "$name" "$f" "$kind" "$line" "see logs/$t-*.log" "$replay" >>"$findings_tsv"
  done
  unset seen
  count[$t]=$n
done

summary="$out/summary.md"
targets_tsv="$out/logs/targets.tsv"
: >"$targets_tsv"
: >"$out/logs/gpu_workers.tsv"
total_findings=0
nostart=()
for f in "$out"/logs/*.nostart; do [ -f "$f" ] && nostart+=("$f"); done
per_s() { awk -v n="$1" -v b="$budget" 'BEGIN {printf "%.2f", (b > 0 ? n / b : 0)}'; }
{
  echo "# flashcheck nightly fuzz, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "Budget ${budget}s; $gpus GPU(s), $kernel_workers fuzz_kernel worker(s) on each (${worker_split:-none};" \
    "$kernel_threads oracle thread(s) each); $cpu_workers worker(s) per CPU target; commit $commit."
  echo
  echo "| target | workers | executions | exec/s | cov | ft | ft gained/s | new inputs/s | corpus (merged) | findings |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for t in "${targets[@]}"; do
    logs=("$out"/logs/"$t"-*[0-9].log)
    execs=$(cat "${logs[@]}" | awk '/^stat::number_of_executed_units/ {s += $NF} END {print s + 0}')
    rate=$(awk -v e="$execs" -v b="$budget" 'BEGIN {printf "%.1f", (b > 0 ? e / b : 0)}')
    cov=$(cat "${logs[@]}" | grep -oE 'cov: [0-9]+' | awk '{if ($2 > m) m = $2} END {print m + 0}')
    ft=$(cat "${logs[@]}" | grep -oE 'ft: [0-9]+' | awk '{if ($2 > m) m = $2} END {print m + 0}')
    size=$(find "$corpus_root/$t" -type f | wc -l)
    merged=1 shown_size=$size
    if [ -f "$out/logs/$t.unmerged" ]; then
      merged=0 shown_size="$size (unmerged: exit $(cat "$out/logs/$t.unmerged"))"
    fi
    total_findings=$((total_findings + count[$t]))
    # Coverage growth: inputs libFuzzer kept as new (its "NEW" lines) and cov from the first INITED to the end.
    new_inputs=$(cat "${logs[@]}" | grep -cE '^#[0-9]+[[:space:]]+NEW')
    cov_initial=$(cat "${logs[@]}" | grep -E '^#[0-9]+[[:space:]]+INITED' | grep -oE 'cov: [0-9]+' |
      awk 'NR == 1 || $2 < m {m = $2} END {print m + 0}')
    ft_initial=$(cat "${logs[@]}" | grep -E '^#[0-9]+[[:space:]]+INITED' | grep -oE 'ft: [0-9]+' |
      awk 'NR == 1 || $2 < m {m = $2} END {print m + 0}')
    tsv_row "$(shown "$t")" "${#logs[@]}" "$execs" "$cov" "$ft" "$size" "${count[$t]}" "$new_inputs" "$cov_initial" \
      "$ft_initial" "$merged" >>"$targets_tsv"
    echo "| $(shown "$t") | ${#logs[@]} | $execs | $rate | $cov | $ft | $(per_s $((ft - ft_initial))) |" \
      "$(per_s "$new_inputs") | $shown_size | ${count[$t]} |"
  done
  if [ ${#kernel_targets[@]} -gt 0 ]; then
    echo
    echo "| fuzz_kernel worker | target | CUDA_VISIBLE_DEVICES | executions | exec/s | time per stage (the worker's last run) |"
    echo "|---|---|---|---|---|---|"
    for t in "${kernel_targets[@]}"; do
      for ((g = 0; g < gpus; ++g)); do
        for ((w = 0; w < workers_of[$t]; ++w)); do
          log="$out/logs/$t-gpu$g-w$w.log"
          execs=$(awk '/^stat::number_of_executed_units/ {s += $NF} END {print s + 0}' "$log")
          stages=$(grep 'stage times:' "$log" | tail -1 | sed 's/.*stage times: //')
          tsv_row "gpu$g-w$w" "$(shown "$t")" "${gpu_list[$g]}" "$execs" >>"$out/logs/gpu_workers.tsv"
          echo "| gpu$g-w$w | $(shown "$t") | ${gpu_list[$g]} | $execs |" \
            "$(awk -v e="$execs" -v b="$budget" 'BEGIN {printf "%.1f", (b > 0 ? e / b : 0)}') | ${stages:-} |"
        done
      done
    done
  fi
  echo
  echo "exec/s: all executions of a target's workers divided by the budget. cov/ft: the largest libFuzzer"
  echo "reported (ft includes flashcheck's extra counters: tile kinds, rescales, special values, error/bound buckets);"
  echo "ft gained/s: ft minus its value once the corpus was loaded (the smallest INITED), per second of budget;"
  echo "new inputs/s: inputs libFuzzer kept for new features, per second. fuzz_kernel:PROFILE: fuzz_kernel with"
  echo "FLASHCHECK_FUZZ_PROFILE=PROFILE (fuzz/README.md, \"Size profiles\")."
  echo
  if [ ${#nostart[@]} -gt 0 ]; then
    echo "## Workers that could not fuzz"
    echo
    for f in "${nostart[@]}"; do echo "- $(basename "$f" .nostart): \`$(cat "$f")\`"; done
    echo
  fi
  echo "## Findings"
  echo
  if [ "$total_findings" -eq 0 ]; then echo "None."; else printf '%s' "$findings_md"; fi
} >"$summary"
FUZZ_OUT="$out" FUZZ_BUDGET="$budget" FUZZ_GPUS="$gpus" FUZZ_CPU_WORKERS="$cpu_workers" \
  FUZZ_KERNEL_SPLIT="$(for t in "${kernel_targets[@]}"; do printf '%s=%s ' "$(profile_of "$t")" "${workers_of[$t]}"; done)" \
  FUZZ_KERNEL_THREADS="$kernel_threads" \
  FUZZ_COMMIT="$commit" python3 - <<'PY' || echo "nightly_fuzz.sh: summary.json not written" >&2
import glob, json, os
out = os.environ["FUZZ_OUT"]
budget = int(os.environ["FUZZ_BUDGET"])
def rows(name):
    path = os.path.join(out, "logs", name)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]
per_s = lambda n: round(n / budget, 3) if budget > 0 else 0.0
findings = [dict(zip(("target", "file", "kind", "case", "message", "replay"), r)) for r in rows("findings.tsv")]
for f in findings:
    f["case"] = f.get("case") or None
targets = []
for t, workers, execs, cov, ft, corpus, count, new_inputs, cov_initial, ft_initial, merged in rows("targets.tsv"):
    targets.append({"target": t, "workers": int(workers), "executions": int(execs), "exec_per_s": per_s(int(execs)),
                    "cov": int(cov), "ft": int(ft), "cov_initial": int(cov_initial),
                    "cov_gain_per_s": per_s(int(cov) - int(cov_initial)), "ft_initial": int(ft_initial),
                    "ft_gain_per_s": per_s(int(ft) - int(ft_initial)), "new_inputs": int(new_inputs),
                    "new_inputs_per_s": per_s(int(new_inputs)), "corpus": int(corpus),
                    "corpus_merged": merged == "1", "findings": int(count)})
not_started = [{"worker": os.path.basename(p)[:-len(".nostart")], "message": open(p).read().strip()}
               for p in sorted(glob.glob(os.path.join(out, "logs", "*.nostart")))]
gpu_workers = [{"worker": w, "target": t, "cuda_visible_devices": d, "executions": int(e), "exec_per_s": per_s(int(e))}
               for w, t, d, e in rows("gpu_workers.tsv")]
split = dict(item.split("=") for item in os.environ["FUZZ_KERNEL_SPLIT"].split())
doc = {"schema": "flashcheck-nightly-fuzz/3", "budget_s": budget, "gpus": int(os.environ["FUZZ_GPUS"]),
       "kernel_workers_per_gpu": {profile: int(n) for profile, n in split.items()},
       "kernel_oracle_threads": int(os.environ["FUZZ_KERNEL_THREADS"]),
       "cpu_workers_per_target": int(os.environ["FUZZ_CPU_WORKERS"]), "commit": os.environ["FUZZ_COMMIT"],
       "targets": targets, "gpu_workers": gpu_workers, "not_started": not_started, "findings": findings}
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
PY
cat "$summary"
if [ ${#nostart[@]} -gt 0 ]; then
  echo "nightly_fuzz.sh: ${#nostart[@]} worker(s) could not fuzz (summary.md, logs/*.nostart)" >&2
  exit 2
fi
[ "$total_findings" -eq 0 ]
