// GPU tier, instrumented build: the properties of the instrumented kind (the online-softmax invariants from the
// per-tile (m, l) traces of flashcheck_kernel_instrumented; inputs past the L2 cache), CTest label gpu, skipped
// without a device.
#include "suite.h"
#include "tier.h"

namespace {
namespace fp = flashcheck::properties;
const bool kTierInstalled = fp::install_tier({.backend = flashcheck::Backend::kGpu, .default_cases = 750});
const bool kSuiteRegistered = fp::register_suite("Gpu_Properties", /*production=*/false, /*instrumented=*/true);
}  // namespace
