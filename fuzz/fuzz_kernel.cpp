// fuzz_kernel (GPU): the instrumented CUDA kernel, through the harness's runner, against the oracle on sampled
// rows. Coverage comes from the extra counters (fuzz_signals.h): tile kinds and rescale buckets the kernel
// counts, special values, and the log2 bucket of the worst error/bound ratio. Without a usable device it says
// so ("nothing to fuzz, skipped", what the CTest tests match to report a skip) and exits with 0: libFuzzer's
// own crash exit code is 77, the usual "skipped" code, so a skip code could hide a crash. Linked against the
// mutant harness (the kernels with the mutant catalogue compiled in, flashcheck/mutants.h) it is fuzz_kernel_mutant:
// the same target with FLASHCHECK_MUTANT=general-missing-rescale unless the environment names another, which it
// must find.
#include <cstdio>
#include <cstdlib>

#include "check_one.h"
#include "finding.h"
#include "flashcheck/device.h"
#include "flashcheck/runner.h"

// The host libraries are built with ASan in the fuzz build. The CUDA driver maps memory inside ASan's
// shadow gap, so the gap must stay unprotected; the driver's allocations at exit are not leaks of ours.
extern "C" const char* __asan_default_options() { return "protect_shadow_gap=0:detect_leaks=0"; }

namespace {

flashcheck::fuzz::TargetSpec g_spec;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  flashcheck::fuzz::init_artifact_prefix(*argc, *argv);
  // Under CTest with a resource spec, the GPU the test was given; otherwise the current device (one worker
  // per GPU gets its own through CUDA_VISIBLE_DEVICES, ci/nightly_fuzz.sh).
  if (flashcheck::Status s = flashcheck::select_device_from_environment(); !s.ok()) {
    std::fprintf(stderr, "%s: device selection failed: %s\n", FLASHCHECK_FUZZ_TARGET_NAME, s.message().c_str());
    return 1;
  }
  if (!flashcheck::device_available()) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    std::fprintf(stderr, "%s: no usable CUDA device (CUDA_VISIBLE_DEVICES=%s): nothing to fuzz, skipped\n",
                 FLASHCHECK_FUZZ_TARGET_NAME, visible ? visible : "unset");
    std::exit(0);
  }
#if defined(FLASHCHECK_FUZZ_DEFAULT_MUTANT)
  setenv("FLASHCHECK_MUTANT", FLASHCHECK_FUZZ_DEFAULT_MUTANT, /*overwrite=*/0);
#endif
  flashcheck::fuzz::SizeProfile profile;
  if (!flashcheck::fuzz::profile_from_environment(&profile)) {
    std::fprintf(stderr, "%s: unknown FLASHCHECK_FUZZ_PROFILE '%s' (small, medium, all)\n", FLASHCHECK_FUZZ_TARGET_NAME,
                 std::getenv("FLASHCHECK_FUZZ_PROFILE"));
    return 1;
  }
  g_spec = flashcheck::fuzz::kernel_target_spec(profile);
  g_spec.name = FLASHCHECK_FUZZ_TARGET_NAME;
  flashcheck::fuzz::print_stage_times_at_exit_if_asked(FLASHCHECK_FUZZ_TARGET_NAME);
  // Device buffers kept between executions (grow only): a cudaMalloc per buffer would dominate the rate.
  // Never freed: the process ends through libFuzzer's exit(), and freeing then would race the CUDA runtime's
  // own teardown.
  g_spec.run.device_pool = new flashcheck::DevicePool;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return flashcheck::fuzz::check_one(g_spec, data, size);
}
