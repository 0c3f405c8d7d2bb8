// GPU tier, instrumented build: the online-softmax invariants from the per-tile (m, l) traces of
// flashcheck_kernel_instrumented (CTest label gpu; skipped without a device).
#include "tier.h"

namespace {
const bool kTierInstalled =
    flashcheck::properties::install_tier({.backend = flashcheck::Backend::kGpu, .default_cases = 750});
}  // namespace

#define FLASHCHECK_SUITE Gpu_Properties
#define FLASHCHECK_SUITE_PRODUCTION 0
#define FLASHCHECK_SUITE_INSTRUMENTED 1
#include "suite.inc"
