#!/usr/bin/env bash
# The CTest resource spec end to end, on a host without a GPU (CPU tier):
#   1. ci/resource_spec.sh: valid JSON with ids 0..n-1 and the slots asked for, from each source (a fake
#      nvidia-smi listing two GPUs, FLASHCHECK_GPU_COUNT, CUDA_VISIBLE_DEVICES, a given file, nothing at all),
#      --gpus N taking the first N, --count, --visible (one CUDA_VISIBLE_DEVICES value per GPU), usage errors;
#   2. a fake spec of two "GPUs" with one slot each, mapped onto this one host: ctest runs four copies of a GPU
#      test binary (RESOURCE_GROUPS gpus:1) at -j 4, two at a time, and each binary reports the GPU id CTest
#      gave it (gtest_gpu_main.cpp), both ids in use; with no device every test still passes (skips).
#   resource_spec_test.sh SOURCE_DIR GPU_TEST_BINARY CTEST
set -euo pipefail
src=$1 gpu_test=$2 ctest=$3
spec_sh="$src/ci/resource_spec.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# ids NAME FILE: the GPU ids and slots of a spec, "0:1 1:1".
ids() {
  python3 - "$1" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
assert spec["version"] == {"major": 1, "minor": 0}, spec["version"]
print(" ".join(f'{g["id"]}:{g["slots"]}' for g in spec["local"][0]["gpus"]))
PY
}

# ---- 1. the generator
cat >"$work/nvidia-smi" <<'EOF'
#!/bin/sh
# Two GPUs, as nvidia-smi --query-gpu=index --format=csv,noheader lists them.
printf '0\n1\n'
EOF
chmod +x "$work/nvidia-smi"
env -u CUDA_VISIBLE_DEVICES FLASHCHECK_NVIDIA_SMI="$work/nvidia-smi" bash "$spec_sh" --slots-per-gpu 1 -o "$work/two.json"
[ "$(ids "$work/two.json")" = "0:1 1:1" ] || fail "fake nvidia-smi with two GPUs: $(ids "$work/two.json")"
env -u CUDA_VISIBLE_DEVICES FLASHCHECK_NVIDIA_SMI="$work/nvidia-smi" bash "$spec_sh" --gpus 1 -o "$work/one.json"
[ "$(ids "$work/one.json")" = "0:6" ] || fail "--gpus 1 of two: $(ids "$work/one.json")"
FLASHCHECK_GPU_COUNT=4 bash "$spec_sh" --slots-per-gpu 2 -o "$work/four.json"
[ "$(ids "$work/four.json")" = "0:2 1:2 2:2 3:2" ] || fail "FLASHCHECK_GPU_COUNT=4: $(ids "$work/four.json")"
[ "$(FLASHCHECK_GPU_COUNT=4 bash "$spec_sh" --gpus 3 --count 2>/dev/null)" = 3 ] || fail "--gpus 3 --count"
CUDA_VISIBLE_DEVICES=6,GPU-0f2d,7 bash "$spec_sh" -o "$work/visible.json"
[ "$(ids "$work/visible.json")" = "0:6 1:6 2:6" ] || fail "CUDA_VISIBLE_DEVICES: $(ids "$work/visible.json")"
CUDA_VISIBLE_DEVICES= bash "$spec_sh" -o "$work/none.json"
[ "$(ids "$work/none.json")" = "0:6" ] || fail "no GPU: $(ids "$work/none.json")"
env -u CUDA_VISIBLE_DEVICES FLASHCHECK_NVIDIA_SMI="$work/absent" bash "$spec_sh" -o "$work/nosmi.json"
[ "$(ids "$work/nosmi.json")" = "0:6" ] || fail "no nvidia-smi: $(ids "$work/nosmi.json")"
# --visible: one CUDA_VISIBLE_DEVICES value per GPU found, for one process per GPU; none without a GPU.
[ "$(FLASHCHECK_GPU_COUNT=4 bash "$spec_sh" --gpus 2 --visible 2>/dev/null | xargs)" = "0 1" ] || fail "--visible"
[ "$(CUDA_VISIBLE_DEVICES=6,GPU-0f2d bash "$spec_sh" --visible 2>/dev/null | xargs)" = "6 GPU-0f2d" ] ||
  fail "--visible under CUDA_VISIBLE_DEVICES"
[ -z "$(CUDA_VISIBLE_DEVICES= bash "$spec_sh" --visible 2>/dev/null)" ] || fail "--visible without a GPU"
FLASHCHECK_RESOURCE_SPEC="$work/four.json" bash "$spec_sh" -o "$work/given.json"
cmp -s "$work/four.json" "$work/given.json" || fail "FLASHCHECK_RESOURCE_SPEC is not copied unchanged"
[ "$(FLASHCHECK_RESOURCE_SPEC="$work/four.json" bash "$spec_sh" --count 2>/dev/null)" = 4 ] || fail "given --count"
for bad in "--gpus 0" "--gpus x" "--slots-per-gpu 0" "--bogus"; do
  # shellcheck disable=SC2086
  if FLASHCHECK_GPU_COUNT=2 bash "$spec_sh" $bad >/dev/null 2>&1; then fail "accepted: $bad"; fi
done
if FLASHCHECK_GPU_COUNT=2 bash "$spec_sh" --gpus 3 >/dev/null 2>&1; then fail "--gpus 3 of 2 accepted"; fi
bash "$spec_sh" --help | grep -q "usage: ci/resource_spec.sh" || fail "--help"
echo "resource_spec.sh: sources, --gpus, --slots-per-gpu, --count and errors as documented"

# ---- 2. ctest with the fake two-GPU spec on this host
mkdir -p "$work/ctest"
cat >"$work/ctest/probe.sh" <<EOF
#!/bin/sh
# One GPU test binary (one skipping test is enough), held long enough for two to overlap.
"$gpu_test" --gtest_filter='GpuRunner.*' --gtest_brief=1
rc=\$?
sleep 1
exit \$rc
EOF
chmod +x "$work/ctest/probe.sh"
{
  for i in 1 2 3 4; do
    echo "add_test(gpu_probe_$i \"$work/ctest/probe.sh\")"
    echo "set_tests_properties(gpu_probe_$i PROPERTIES RESOURCE_GROUPS \"gpus:1\")"
  done
} >"$work/ctest/CTestTestfile.cmake"
"$ctest" --test-dir "$work/ctest" --resource-spec-file "$work/two.json" -j 4 -V >"$work/ctest.log" 2>&1 ||
  { cat "$work/ctest.log"; fail "ctest with the fake two-GPU spec"; }
grep -q "100% tests passed, 0 tests failed out of 4" "$work/ctest.log" || { cat "$work/ctest.log"; fail "not 4 passed"; }
seen=$(grep -oE "flashcheck: CTest GPU id [0-9]+" "$work/ctest.log" | awk '{print $NF}' | sort | uniq -c | awk '{print $2 "x" $1}' | xargs)
echo "GPU ids CTest handed the four tests (id x tests): $seen"
[ "$(grep -c "flashcheck: CTest GPU id" "$work/ctest.log")" = 4 ] || { cat "$work/ctest.log"; fail "a test reported no GPU id"; }
grep -q "CTest GPU id 0" "$work/ctest.log" && grep -q "CTest GPU id 1" "$work/ctest.log" ||
  fail "both GPUs of the spec should be used: $seen"
if grep -qE "CTest GPU id [2-9]" "$work/ctest.log"; then fail "an id outside the spec: $seen"; fi
echo "PASS: the fake two-GPU spec spreads GPU tests over both ids"
