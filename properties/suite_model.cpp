// CPU tier: every property against the host model of the tiled algorithm (CTest label cpu).
#include "tier.h"

namespace {
const bool kTierInstalled =
    flashcheck::properties::install_tier({.backend = flashcheck::Backend::kHostModel, .default_cases = 100});
}  // namespace

#define FLASHCHECK_SUITE Model_Properties
#define FLASHCHECK_SUITE_PRODUCTION 1
#define FLASHCHECK_SUITE_INSTRUMENTED 1
#include "suite.inc"
