// Which CUDA device a GPU test, tool or fuzzer uses. Under CTest with a resource spec (ci/resource_spec.sh),
// each GPU test holds one slot of one GPU, named by CTEST_RESOURCE_GROUP_0_GPUS ("id:<id>,slots:<n>"); the
// id is a CUDA device ordinal among the devices the process sees. Run by hand (no CTest allocation) a binary
// keeps the current device, so CUDA_VISIBLE_DEVICES picks it as usual. Nothing here assumes device 0.
// The parsing and the choice are host code (tested in the CPU tier); select_device_from_environment() and the
// device helpers reach the CUDA runtime only in a CUDA build, and report no device otherwise.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "flashcheck/attention.h"

namespace flashcheck {

// One entry of a CTest resource allocation: the resource's id and the slots the test holds on it.
struct ResourceSlot {
  std::string id;
  int slots = 0;
};

// Parses the value of CTEST_RESOURCE_GROUP_<g>_<TYPE>: one or more "id:<id>,slots:<n>" entries separated by
// ';' (ids of lower-case letters, digits and '_', as in a CTest resource spec; slots >= 1). kInvalidArgument
// names the offending entry.
Status parse_resource_slots(std::string_view value, std::vector<ResourceSlot>* out);

// The device a process should use, decided from its environment and the number of visible devices.
struct DeviceChoice {
  int device = -1;          // CUDA ordinal to make current; -1 keeps the current device
  bool from_ctest = false;  // the process runs under a CTest resource allocation
  std::string reason;       // one line for logs: where the choice came from
};

// Looks a variable up (std::getenv in production; a map in the tests). Null: unset.
using EnvLookup = std::function<const char*(const char*)>;

// Without CTEST_RESOURCE_GROUP_COUNT, or when group 0 holds no GPUs: keep the current device. Otherwise the
// first GPU id of group 0, which must be an ordinal below device_count; with device_count 0 (no device, or
// a build without CUDA) nothing is selected and the tests skip as they do without a spec.
Status choose_device(const EnvLookup& env, int device_count, DeviceChoice* out);

// Number of CUDA devices this process sees (0 without a driver, a device or CUDA).
int visible_device_count();
// Makes `device` the current CUDA device of this thread.
Status use_device(int device);
// The current CUDA device of this thread, or -1 (no device, or a build without CUDA).
int current_device();
// "NVIDIA H200, 132 SMs, sm_90" for messages; "device N (unavailable)" when the runtime cannot say.
std::string describe_device(int device);

// True when the current CUDA context is lost: a sticky error (an illegal or misaligned address, a device-side
// trap) fails every later CUDA call of the process, so no further case can run in it. A non-sticky error
// pending on the thread is cleared. False without CUDA.
bool device_context_lost();

// choose_device() on the process environment, then use_device(). Called first by every GPU test binary
// (gtest_gpu_main.cpp), flashcheck-repro, flashcheck-report and fuzz_kernel; `chosen` gets the choice.
Status select_device_from_environment(DeviceChoice* chosen = nullptr);

}  // namespace flashcheck
