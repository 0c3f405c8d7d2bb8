// The instrumented GPU kernel with the counters the fuzzer needs (the harness's runner returns row m/l
// but not tile-kind or rescale counts). Guards as the runner's: O and LSE poisoned, kGuardBytes canaries
// after O and LSE, O's padding checked, inputs read back and compared. Device buffers are kept between
// executions (grow only): a cudaMalloc per input would dominate the execution rate.
#pragma once

#include "check_one.h"

namespace flashcheck::fuzz {

RunOutputs run_gpu_counted(const HostInputs& inputs, KernelCounters* counters);

}  // namespace flashcheck::fuzz
