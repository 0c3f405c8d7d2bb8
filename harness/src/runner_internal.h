// Internal seam between the backend-independent runner (runner.cpp) and the GPU launcher
// (runner_gpu.cpp, compiled once against the production kernel and once against the instrumented one).
// Output images are host byte buffers laid out kGuardBytes | payload | kGuardBytes, already poisoned
// and canaried; a backend writes the payload in place (host model) or round-trips the image (GPU).
#pragma once

#include <cstdint>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/inputs.h"

namespace flashcheck::detail {

struct OutputImages {
  std::vector<uint8_t> o, lse, m, l;  // m, l empty unless instrumented
};

// Uploads the inputs and the images, runs the kernel on `stream`, synchronises, downloads the images and
// hashes the device copies of q, k, v into *input_hash_after. `params` carries shape, strides and scale;
// its pointers are replaced by device pointers.
Status run_on_gpu(const HostInputs& inputs, Params params, OutputImages* images, bool instrument, void* stream,
                  uint64_t* input_hash_after);

}  // namespace flashcheck::detail
