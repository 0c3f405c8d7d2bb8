// GPU tier: the properties against the production kernel (CTest label gpu; skipped without a device).
// 20 properties x 750 cases = 15,000 cases by default; FLASHCHECK_CASES or RC_PARAMS=max_success=N override.
#include "tier.h"

namespace {
const bool kTierInstalled =
    flashcheck::properties::install_tier({.backend = flashcheck::Backend::kGpu, .default_cases = 750});
}  // namespace

#define FLASHCHECK_SUITE Gpu_Properties
#define FLASHCHECK_SUITE_PRODUCTION 1
#define FLASHCHECK_SUITE_INSTRUMENTED 0
#include "suite.inc"
