// GPU side of the kernel folder's tests: copies a test::Problem to the device with O and LSE poisoned
// (NaN bytes) and fenced by canary bytes, runs a callable that launches, and copies the results back into
// the Problem, reporting CUDA errors and damaged canaries as a Status. Built only with CUDA; the skip macros
// are there in every build.
#pragma once

#include <gtest/gtest.h>

#include "flashcheck/attention.h"

// Every GPU test starts with SKIP_WITHOUT_DEVICE(): without a device it skips with its reason.
#define SKIP_WITHOUT_DEVICE()                                                                             \
  do {                                                                                                    \
    if (!::flashcheck::device_available())                                                                \
      GTEST_SKIP() << "flashcheck-skip: no CUDA device available (GPU tier test)";                        \
  } while (0)

// A test of the tensor-core family itself skips in a build without it (FLASHCHECK_KERNEL_FAMILIES narrowed,
// as tools/dev/ab_round.sh's decode mode builds).
#if defined(FLASHCHECK_HAS_TENSOR_CORE)
#define SKIP_WITHOUT_TENSOR_CORE() \
  do {                             \
  } while (0)
#else
#define SKIP_WITHOUT_TENSOR_CORE() \
  GTEST_SKIP() << "flashcheck-skip: the tensor-core family is not compiled in (FLASHCHECK_KERNEL_FAMILIES)"
#endif

#if defined(FLASHCHECK_HAS_CUDA)

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "flashcheck/attention.h"
#include "test_problem.h"

namespace flashcheck::test {

inline constexpr unsigned char kCanaryByte = 0xa5;
inline constexpr size_t kCanaryBytes = 256;

inline Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::ok_status();
  return {StatusCode::kCudaError, std::string(what) + ": " + cudaGetErrorString(err)};
}

// One device allocation with canary regions before and after the payload.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (base_ != nullptr) cudaFree(base_);
  }

  // Payload initialised from `bytes` (empty payload: pointer stays null, as the API allows).
  Status init(const std::vector<unsigned char>& bytes) {
    payload_bytes_ = bytes.size();
    if (payload_bytes_ == 0) return Status::ok_status();
    std::vector<unsigned char> staged(payload_bytes_ + 2 * kCanaryBytes, kCanaryByte);
    std::memcpy(staged.data() + kCanaryBytes, bytes.data(), payload_bytes_);
    if (Status st = cuda_status(cudaMalloc(&base_, staged.size()), "cudaMalloc"); !st.ok()) return st;
    return cuda_status(cudaMemcpy(base_, staged.data(), staged.size(), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  }
  void* data() const { return payload_bytes_ == 0 ? nullptr : static_cast<unsigned char*>(base_) + kCanaryBytes; }

  // Copies the payload back; fails if a canary byte changed.
  Status read(std::vector<unsigned char>* bytes) const {
    if (payload_bytes_ == 0) return Status::ok_status();
    std::vector<unsigned char> staged(payload_bytes_ + 2 * kCanaryBytes);
    if (Status st = cuda_status(cudaMemcpy(staged.data(), base_, staged.size(), cudaMemcpyDeviceToHost),
                                "cudaMemcpy D2H");
        !st.ok()) {
      return st;
    }
    for (size_t i = 0; i < kCanaryBytes; ++i) {
      if (staged[i] != kCanaryByte || staged[kCanaryBytes + payload_bytes_ + i] != kCanaryByte) {
        return {StatusCode::kCudaError, "canary bytes around a buffer were overwritten"};
      }
    }
    bytes->assign(staged.begin() + kCanaryBytes, staged.begin() + kCanaryBytes + payload_bytes_);
    return Status::ok_status();
  }

 private:
  void* base_ = nullptr;
  size_t payload_bytes_ = 0;
};

inline std::vector<unsigned char> as_bytes(const std::vector<float>& v) {
  std::vector<unsigned char> bytes(v.size() * sizeof(float));
  if (!bytes.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

// Runs `launch(device_params)` on device copies of `pr` and writes O and LSE back into `pr` (whose O and
// LSE hold the poison the device buffers start with). Inputs are checked unchanged afterwards.
template <typename Launch>
Status run_on_device(Problem* pr, Launch&& launch) {
  DeviceBuffer q, k, v, o, lse;
  for (auto [buffer, bytes] : {std::pair{&q, &pr->q}, std::pair{&k, &pr->k}, std::pair{&v, &pr->v},
                               std::pair{&o, &pr->o}}) {
    if (Status st = buffer->init(*bytes); !st.ok()) return st;
  }
  if (Status st = lse.init(as_bytes(pr->lse)); !st.ok()) return st;
  Params dp = pr->params;
  dp.q = pr->params.q == nullptr ? nullptr : q.data();
  dp.k = pr->params.k == nullptr ? nullptr : k.data();
  dp.v = pr->params.v == nullptr ? nullptr : v.data();
  dp.o = o.data();
  dp.lse = static_cast<float*>(lse.data());
  if (Status st = launch(dp); !st.ok()) return st;
  if (Status st = cuda_status(cudaDeviceSynchronize(), "kernel execution"); !st.ok()) return st;
  std::vector<unsigned char> lse_bytes;
  for (auto [buffer, bytes] : {std::pair{&o, &pr->o}, std::pair{&lse, &lse_bytes}}) {
    if (Status st = buffer->read(bytes); !st.ok()) return st;
  }
  if (!lse_bytes.empty()) std::memcpy(pr->lse.data(), lse_bytes.data(), lse_bytes.size());
  for (auto [buffer, bytes] : {std::pair{&q, &pr->q}, std::pair{&k, &pr->k}, std::pair{&v, &pr->v}}) {
    std::vector<unsigned char> after;
    if (Status st = buffer->read(&after); !st.ok()) return st;
    if (after != *bytes) return {StatusCode::kCudaError, "an input tensor changed during the run"};
  }
  return Status::ok_status();
}

// Runs both problems through `launch` and expects their outputs bit for bit alike (`what` names them).
template <typename Launch>
void expect_same_bits_on_device(Problem* a, Problem* b, Launch&& launch, const std::string& what) {
  for (Problem* pr : {a, b}) {
    const Status st = run_on_device(pr, launch);
    ASSERT_TRUE(st.ok()) << what << ": " << st.message();
  }
  EXPECT_EQ(first_bit_difference(*a, *b), "") << what;
}

}  // namespace flashcheck::test

#endif  // FLASHCHECK_HAS_CUDA
