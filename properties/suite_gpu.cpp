// GPU tier: the production kernel's properties (CTest label gpu; skipped without a device), 750 cases each;
// FLASHCHECK_CASES or RC_PARAMS=max_success=N override.
#include "suite.h"
#include "tier.h"

namespace {
namespace fp = flashcheck::properties;
const bool kTierInstalled = fp::install_tier({.backend = flashcheck::Backend::kGpu, .default_cases = 750});
const bool kSuiteRegistered = fp::register_suite("Gpu_Properties", /*production=*/true, /*instrumented=*/false);
}  // namespace
