#include "gpu_run.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <string>
#include <vector>

#include "flashcheck/instrument.h"

namespace flashcheck::fuzz {
namespace {

// A device allocation reused across executions.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  // The process exits through libFuzzer; freeing at exit would race the CUDA runtime's own teardown.
  ~DeviceBuffer() = default;

  cudaError_t reserve(size_t bytes) {
    if (bytes <= capacity_) return cudaSuccess;
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    capacity_ = 0;
    const cudaError_t err = cudaMalloc(&ptr_, bytes);
    if (err == cudaSuccess) capacity_ = bytes;
    return err;
  }
  uint8_t* get() const { return static_cast<uint8_t*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  size_t capacity_ = 0;
};

enum BufferId { kQ, kK, kV, kO, kLse, kRowM, kRowL, kCounters, kBufferCount };
DeviceBuffer g_buffers[kBufferCount];

Status cuda_status(cudaError_t err, const char* what) {
  return {StatusCode::kCudaError, std::string(what) + ": " + cudaGetErrorString(err)};
}

#define FC_CUDA(call, what)                               \
  do {                                                    \
    if (cudaError_t err_ = (call); err_ != cudaSuccess) { \
      out.status = cuda_status(err_, what);               \
      return out;                                         \
    }                                                     \
  } while (0)

bool region_holds(const std::vector<uint8_t>& bytes, size_t begin, size_t end, uint8_t value) {
  for (size_t i = begin; i < end; ++i) {
    if (bytes[i] != value) return false;
  }
  return true;
}

}  // namespace

RunOutputs run_gpu_counted(const HostInputs& inputs, KernelCounters* counters) {
  RunOutputs out;
  Params params = inputs.params;
  params.o_stride = params.q_stride;
  out.config = select_config(params);
  const int64_t rows = params.batch * params.heads_q * params.seqlen_q;
  const size_t o_bytes = static_cast<size_t>(o_buffer_elements(params) * dtype_size(params.dtype));
  const size_t lse_bytes = static_cast<size_t>(rows) * sizeof(float);
  const size_t guard = static_cast<size_t>(kGuardBytes);

  // Inputs (each at least one byte so empty tensors still get a valid pointer).
  const std::vector<uint8_t>* host_in[3] = {&inputs.q, &inputs.k, &inputs.v};
  for (int t = 0; t < 3; ++t) {
    FC_CUDA(g_buffers[kQ + t].reserve(host_in[t]->size() + 1), "cudaMalloc(input)");
    FC_CUDA(cudaMemcpy(g_buffers[kQ + t].get(), host_in[t]->data(), host_in[t]->size(), cudaMemcpyHostToDevice),
            "cudaMemcpy(input)");
  }
  params.q = g_buffers[kQ].get();
  params.k = g_buffers[kK].get();
  params.v = g_buffers[kV].get();

  // Outputs: poison, then kGuardBytes of canary after each.
  std::vector<uint8_t> o_host(o_bytes + guard), lse_host(lse_bytes + guard);
  {
    const uint32_t poison = params.dtype == DType::kF32 ? kPoisonBits32 : kPoisonBits16;
    const size_t size = static_cast<size_t>(dtype_size(params.dtype));
    for (size_t e = 0; e < o_bytes; e += size) std::memcpy(o_host.data() + e, &poison, size);
    for (size_t e = 0; e < lse_bytes; e += sizeof(float))
      std::memcpy(lse_host.data() + e, &kPoisonBits32, sizeof(float));
    std::memset(o_host.data() + o_bytes, kCanaryByte, guard);
    std::memset(lse_host.data() + lse_bytes, kCanaryByte, guard);
  }
  FC_CUDA(g_buffers[kO].reserve(o_host.size()), "cudaMalloc(O)");
  FC_CUDA(g_buffers[kLse].reserve(lse_host.size()), "cudaMalloc(LSE)");
  FC_CUDA(cudaMemcpy(g_buffers[kO].get(), o_host.data(), o_host.size(), cudaMemcpyHostToDevice), "cudaMemcpy(O)");
  FC_CUDA(cudaMemcpy(g_buffers[kLse].get(), lse_host.data(), lse_host.size(), cudaMemcpyHostToDevice),
          "cudaMemcpy(LSE)");
  params.o = g_buffers[kO].get();
  params.lse = reinterpret_cast<float*>(g_buffers[kLse].get());

  // Instrumentation: row m/l and the accumulated counters, zeroed.
  const size_t row_bytes = static_cast<size_t>(rows) * sizeof(float) + 1;
  constexpr size_t kCounterBytes = sizeof(KernelCounters);
  FC_CUDA(g_buffers[kRowM].reserve(row_bytes), "cudaMalloc(m)");
  FC_CUDA(g_buffers[kRowL].reserve(row_bytes), "cudaMalloc(l)");
  FC_CUDA(g_buffers[kCounters].reserve(kCounterBytes), "cudaMalloc(counters)");
  FC_CUDA(cudaMemset(g_buffers[kCounters].get(), 0, kCounterBytes), "cudaMemset(counters)");
  Instrumentation inst;
  inst.row_m = reinterpret_cast<float*>(g_buffers[kRowM].get());
  inst.row_l = reinterpret_cast<float*>(g_buffers[kRowL].get());
  inst.tile_kind_counts = reinterpret_cast<uint64_t*>(g_buffers[kCounters].get());
  inst.rescale_buckets = inst.tile_kind_counts + kTileKindCount;

  out.status = run_instrumented(params, inst, nullptr);
  if (!out.status.ok()) return out;
  FC_CUDA(cudaDeviceSynchronize(), "kernel execution");

  FC_CUDA(cudaMemcpy(o_host.data(), g_buffers[kO].get(), o_host.size(), cudaMemcpyDeviceToHost), "cudaMemcpy(O back)");
  FC_CUDA(cudaMemcpy(lse_host.data(), g_buffers[kLse].get(), lse_host.size(), cudaMemcpyDeviceToHost),
          "cudaMemcpy(LSE back)");
  out.row_m.resize(static_cast<size_t>(rows));
  out.row_l.resize(static_cast<size_t>(rows));
  FC_CUDA(cudaMemcpy(out.row_m.data(), inst.row_m, rows * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy(m back)");
  FC_CUDA(cudaMemcpy(out.row_l.data(), inst.row_l, rows * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy(l back)");
  FC_CUDA(cudaMemcpy(counters, g_buffers[kCounters].get(), kCounterBytes, cudaMemcpyDeviceToHost),
          "cudaMemcpy(counters back)");

  std::vector<float> lse(static_cast<size_t>(rows));
  if (lse_bytes > 0) std::memcpy(lse.data(), lse_host.data(), lse_bytes);  // rows == 0: data() may be null
  decode_outputs(params, o_host.data(), lse.data(), &out);
  if (out.canaries_intact && !region_holds(o_host, o_bytes, o_host.size(), kCanaryByte)) {
    out.canaries_intact = false;
    out.damaged_buffer = "O";
  } else if (out.canaries_intact && !region_holds(lse_host, lse_bytes, lse_host.size(), kCanaryByte)) {
    out.canaries_intact = false;
    out.damaged_buffer = "LSE";
  }
  for (int t = 0; t < 3 && out.inputs_unchanged; ++t) {
    std::vector<uint8_t> back(host_in[t]->size());
    FC_CUDA(cudaMemcpy(back.data(), g_buffers[kQ + t].get(), back.size(), cudaMemcpyDeviceToHost),
            "cudaMemcpy(input back)");
    out.inputs_unchanged = back == *host_in[t];
  }
  return out;
}

}  // namespace flashcheck::fuzz
