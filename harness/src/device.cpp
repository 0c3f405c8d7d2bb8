// Device selection from a CTest resource allocation (flashcheck/device.h). The parser and the choice are plain
// host code; only visible_device_count() and use_device() touch the CUDA runtime, and only when
// FLASHCHECK_DEVICE_CUDA is set (a build without CUDA sees no device and selects nothing).
#include "flashcheck/device.h"

#include <charconv>
#include <cstdlib>

#if FLASHCHECK_DEVICE_CUDA
#include <cuda_runtime.h>
#endif

namespace flashcheck {
namespace {

Status invalid(std::string message) { return {StatusCode::kInvalidArgument, std::move(message)}; }

bool is_id_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

// A whole string of decimal digits as a non-negative int; false on anything else or overflow.
bool parse_count(std::string_view text, int* out) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end && *out >= 0 && text.front() != '+' && text.front() != '-';
}

// "id:<id>,slots:<n>", the form CTest writes for each resource a test holds.
Status parse_entry(std::string_view entry, ResourceSlot* out) {
  std::string quoted(1, '\'');
  quoted.append(entry).push_back('\'');
  const size_t comma = entry.find(',');
  if (comma == std::string_view::npos) return invalid("resource entry " + quoted + " is not 'id:<id>,slots:<n>'");
  const std::string_view id_part = entry.substr(0, comma);
  const std::string_view slots_part = entry.substr(comma + 1);
  if (!id_part.starts_with("id:") || !slots_part.starts_with("slots:")) {
    return invalid("resource entry " + quoted + " is not 'id:<id>,slots:<n>'");
  }
  const std::string_view id = id_part.substr(3);
  if (id.empty()) return invalid("resource entry " + quoted + " has an empty id");
  for (char c : id) {
    if (!is_id_char(c)) return invalid("resource entry " + quoted + ": an id has only a-z, 0-9 and '_'");
  }
  int slots = 0;
  if (!parse_count(slots_part.substr(6), &slots) || slots < 1) {
    return invalid("resource entry " + quoted + ": slots must be a whole number >= 1");
  }
  out->id = std::string(id);
  out->slots = slots;
  return Status::ok_status();
}

}  // namespace

Status parse_resource_slots(std::string_view value, std::vector<ResourceSlot>* out) {
  out->clear();
  if (value.empty()) return invalid("empty resource allocation (expected 'id:<id>,slots:<n>')");
  size_t start = 0;
  while (true) {
    const size_t semicolon = value.find(';', start);
    const std::string_view entry = value.substr(start, semicolon == std::string_view::npos ? value.npos : semicolon - start);
    ResourceSlot slot;
    if (Status s = parse_entry(entry, &slot); !s.ok()) {
      out->clear();
      return s;
    }
    out->push_back(std::move(slot));
    if (semicolon == std::string_view::npos) break;
    start = semicolon + 1;
  }
  return Status::ok_status();
}

Status choose_device(const EnvLookup& env, int device_count, DeviceChoice* out) {
  *out = DeviceChoice{};
  const char* groups = env("CTEST_RESOURCE_GROUP_COUNT");
  if (groups == nullptr || *groups == '\0') {
    out->reason = "no CTest resource allocation: the current device";
    return Status::ok_status();
  }
  out->from_ctest = true;
  int group_count = 0;
  if (!parse_count(groups, &group_count) || group_count < 1) {
    return invalid(std::string("CTEST_RESOURCE_GROUP_COUNT='") + groups + "' is not a whole number >= 1");
  }
  const char* gpus = env("CTEST_RESOURCE_GROUP_0_GPUS");
  if (gpus == nullptr) {
    out->reason = "the CTest resource allocation holds no GPU: the current device";
    return Status::ok_status();
  }
  std::vector<ResourceSlot> slots;
  if (Status s = parse_resource_slots(gpus, &slots); !s.ok()) {
    return invalid("CTEST_RESOURCE_GROUP_0_GPUS: " + s.message());
  }
  const std::string& id = slots.front().id;
  int ordinal = 0;
  if (!parse_count(id, &ordinal)) {
    return invalid("CTEST_RESOURCE_GROUP_0_GPUS: GPU id '" + id +
                   "' is not a CUDA device ordinal (the resource spec lists GPUs as 0, 1, ...: ci/resource_spec.sh)");
  }
  if (device_count == 0) {
    out->reason = "CTest GPU id " + id + ", but no CUDA device is visible: GPU tests skip";
    return Status::ok_status();
  }
  if (ordinal >= device_count) {
    return invalid("CTEST_RESOURCE_GROUP_0_GPUS: GPU id " + id + " but only " + std::to_string(device_count) +
                   " CUDA device(s) are visible; the resource spec lists more GPUs than this process sees "
                   "(regenerate it with ci/resource_spec.sh under the same CUDA_VISIBLE_DEVICES)");
  }
  out->device = ordinal;
  out->reason = "CTest GPU id " + id + ": CUDA device " + id + " of " + std::to_string(device_count);
  return Status::ok_status();
}

#if FLASHCHECK_DEVICE_CUDA

int visible_device_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

Status use_device(int device) {
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    return {StatusCode::kCudaError, "cudaSetDevice(" + std::to_string(device) + "): " + cudaGetErrorString(e)};
  }
  return Status::ok_status();
}

int current_device() {
  int device = -1;
  return cudaGetDevice(&device) == cudaSuccess ? device : -1;
}

std::string describe_device(int device) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return "device " + std::to_string(device) + " (unavailable)";
  return std::string(prop.name) + ", " + std::to_string(prop.multiProcessorCount) + " SMs, sm_" +
         std::to_string(prop.major) + std::to_string(prop.minor);
}

bool device_context_lost() {
  if (cudaDeviceSynchronize() == cudaSuccess) return false;
  (void)cudaGetLastError();  // a non-sticky error is cleared here; a sticky one stays
  return cudaDeviceSynchronize() != cudaSuccess;
}

#else

int visible_device_count() { return 0; }

bool device_context_lost() { return false; }

int current_device() { return -1; }

std::string describe_device(int device) { return "device " + std::to_string(device) + " (unavailable)"; }

Status use_device(int device) {
  return {StatusCode::kNoDevice, "use_device(" + std::to_string(device) + "): flashcheck was built without CUDA"};
}

#endif

Status select_device_from_environment(DeviceChoice* chosen) {
  DeviceChoice choice;
  const EnvLookup env = [](const char* name) -> const char* { return std::getenv(name); };
  // The device count is asked only under CTest: a binary run by hand (or listing its tests) makes no CUDA call.
  const bool under_ctest = env("CTEST_RESOURCE_GROUP_COUNT") != nullptr;
  Status status = choose_device(env, under_ctest ? visible_device_count() : 0, &choice);
  if (status.ok() && choice.device >= 0) status = use_device(choice.device);
  if (chosen != nullptr) *chosen = std::move(choice);
  return status;
}

}  // namespace flashcheck
