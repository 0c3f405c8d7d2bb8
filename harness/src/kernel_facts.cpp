// The kernel's configuration and split count for the suite (kernel_facts.h): the kernel's own answers, passed on
// unchanged, so that a generator's tiles and a bound's splits are the ones run() uses.
#include "flashcheck/kernel_facts.h"

namespace flashcheck {

KernelConfig kernel_config(const Params& params) { return select_config(params); }

int32_t kernel_splits(const Params& params) { return effective_splits(params); }

}  // namespace flashcheck
