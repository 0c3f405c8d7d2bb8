// CPU tier: every property against the host model of the tiled algorithm (CTest label cpu).
// 21 properties x 200 cases; FLASHCHECK_CASES or RC_PARAMS=max_success=N override.
#include "tier.h"

namespace {
const bool kTierInstalled =
    flashcheck::properties::install_tier({.backend = flashcheck::Backend::kHostModel, .default_cases = 200});
}  // namespace

#define FLASHCHECK_SUITE Model_Properties
#define FLASHCHECK_SUITE_PRODUCTION 1
#define FLASHCHECK_SUITE_INSTRUMENTED 1
#include "suite.inc"
