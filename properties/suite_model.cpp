// CPU tier: every property of property_table() against the host model of the tiled algorithm (CTest label cpu),
// 200 cases each; FLASHCHECK_CASES or RC_PARAMS=max_success=N override.
#include "suite.h"
#include "tier.h"

namespace {
namespace fp = flashcheck::properties;
const bool kTierInstalled = fp::install_tier({.backend = flashcheck::Backend::kHostModel, .default_cases = 200});
const bool kSuiteRegistered = fp::register_suite("Model_Properties", /*production=*/true, /*instrumented=*/true);
}  // namespace
