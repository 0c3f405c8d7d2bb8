// Device inputs (device_inputs.h) in a build without CUDA: no device buffer ever exists, and every request for one
// is kNoDevice after the case's own checks, so the CPU tier reports the cases that need a device as skipped.
#include "flashcheck/device_inputs.h"

namespace flashcheck {
namespace {

Status no_cuda() {
  return {StatusCode::kNoDevice,
          "flashcheck was built without CUDA (FLASHCHECK_CUDA=OFF): inputs cannot be generated on a device"};
}

}  // namespace

DeviceInputs::~DeviceInputs() = default;
DeviceInputs::DeviceInputs(DeviceInputs&& other) noexcept { *this = std::move(other); }
DeviceInputs& DeviceInputs::operator=(DeviceInputs&& other) noexcept {
  params = other.params;
  q_bytes = other.q_bytes;
  kv_bytes = other.kv_bytes;
  sink = std::move(other.sink);
  sink_exact = std::move(other.sink_exact);
  return *this;
}
void DeviceInputs::release() {}

Status make_device_inputs(const Case& c, DeviceInputs*) {
  if (Status s = check_device_inputs_case(c); !s.ok()) return s;
  return no_cuda();
}

Status download_device_inputs(const DeviceInputs&, std::vector<uint8_t>*, std::vector<uint8_t>*,
                              std::vector<uint8_t>*) {
  return no_cuda();
}

Status draw_on_device(const Case&, char, std::vector<uint8_t>*) { return no_cuda(); }

SampledRun run_sampled_on_device(const Case& c, std::span<const oracle::RowRef>, void*) {
  SampledRun result;
  result.status = check_device_inputs_case(c);
  if (result.status.ok()) result.status = no_cuda();
  return result;
}

}  // namespace flashcheck
