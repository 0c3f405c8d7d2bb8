// GPU backend of the runner, through the CUDA runtime API (host code, no kernels here). Compiled twice:
// into flashcheck_harness against run() of the production kernel, and into flashcheck_harness_instrumented
// (FLASHCHECK_HARNESS_INSTRUMENTED=1) against run_instrumented(), which also records row m and l.
// Without CUDA (FLASHCHECK_HARNESS_CUDA=0) every GPU run reports kNoDevice.
#include <string>

#include "flashcheck/instrument.h"
#include "flashcheck/runner.h"
#include "runner_internal.h"

#if FLASHCHECK_HARNESS_CUDA
#include <cuda_runtime.h>
#endif

#ifndef FLASHCHECK_HARNESS_INSTRUMENTED
#define FLASHCHECK_HARNESS_INSTRUMENTED 0
#endif

namespace flashcheck {

bool gpu_instrumentation_linked() { return FLASHCHECK_HARNESS_INSTRUMENTED != 0; }

namespace detail {

#if FLASHCHECK_HARNESS_CUDA
// Every CUDA step returns its Status; the first failure ends the run (DeviceBuffers free themselves).
#define FLASHCHECK_RETURN_IF_ERROR(expr)          \
  do {                                            \
    if (Status status_ = (expr); !status_.ok()) { \
      return status_;                             \
    }                                             \
  } while (0)

namespace {

Status cuda_status(cudaError_t error, const char* what) {
  return {StatusCode::kCudaError, std::string(what) + ": " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error)};
}

// One device allocation, freed on scope exit (also on every early error return).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  // Allocates and uploads `bytes` (nothing for an empty range: the pointer stays null, as the API allows).
  Status upload(const std::vector<uint8_t>& bytes, cudaStream_t stream, const char* name) {
    if (bytes.empty()) return Status::ok_status();
    if (cudaError_t e = cudaMalloc(&ptr_, bytes.size()); e != cudaSuccess) return cuda_status(e, name);
    size_ = bytes.size();
    if (cudaError_t e = cudaMemcpyAsync(ptr_, bytes.data(), size_, cudaMemcpyHostToDevice, stream); e != cudaSuccess) {
      return cuda_status(e, name);
    }
    return Status::ok_status();
  }
  Status download(std::vector<uint8_t>* bytes, cudaStream_t stream, const char* name) const {
    if (size_ == 0) return Status::ok_status();
    if (cudaError_t e = cudaMemcpyAsync(bytes->data(), ptr_, size_, cudaMemcpyDeviceToHost, stream); e != cudaSuccess) {
      return cuda_status(e, name);
    }
    return Status::ok_status();
  }
  uint8_t* data() const { return static_cast<uint8_t*>(ptr_); }
  // Start of an image's payload (after the leading guard).
  uint8_t* payload() const { return ptr_ == nullptr ? nullptr : data() + kGuardBytes; }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace

Status run_on_gpu(const HostInputs& inputs, Params params, OutputImages* images, bool instrument, void* stream,
                  uint64_t* input_hash_after) {
  if (instrument && !FLASHCHECK_HARNESS_INSTRUMENTED) {
    return {StatusCode::kUnsupported,
            "GPU instrumentation (row m, l) needs flashcheck_harness_instrumented, linked with "
            "flashcheck_kernel_instrumented; this binary links the production kernel"};
  }
  if (!device_available()) return {StatusCode::kNoDevice, "no CUDA device available"};
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);

  DeviceBuffer q, k, v, o, lse, m, l;
  FLASHCHECK_RETURN_IF_ERROR(q.upload(inputs.q, cuda_stream, "upload q"));
  FLASHCHECK_RETURN_IF_ERROR(k.upload(inputs.k, cuda_stream, "upload k"));
  FLASHCHECK_RETURN_IF_ERROR(v.upload(inputs.v, cuda_stream, "upload v"));
  FLASHCHECK_RETURN_IF_ERROR(o.upload(images->o, cuda_stream, "upload O image"));
  FLASHCHECK_RETURN_IF_ERROR(lse.upload(images->lse, cuda_stream, "upload LSE image"));
  FLASHCHECK_RETURN_IF_ERROR(m.upload(images->m, cuda_stream, "upload m image"));
  FLASHCHECK_RETURN_IF_ERROR(l.upload(images->l, cuda_stream, "upload l image"));
  params.q = q.data();
  params.k = k.data();
  params.v = v.data();
  params.o = o.payload();
  params.lse = reinterpret_cast<float*>(lse.payload());

  Status call_status;
#if FLASHCHECK_HARNESS_INSTRUMENTED
  Instrumentation inst;
  if (instrument) {
    inst.row_m = reinterpret_cast<float*>(m.payload());
    inst.row_l = reinterpret_cast<float*>(l.payload());
  }
  call_status = run_instrumented(params, inst, stream);
#else
  call_status = run(params, stream);
#endif
  // Errors during execution surface at the synchronisation; report them even if the launch said ok.
  if (cudaError_t e = cudaStreamSynchronize(cuda_stream); e != cudaSuccess) return cuda_status(e, "kernel execution");

  // Read everything back, also after a rejected call: the canaries must be intact either way.
  FLASHCHECK_RETURN_IF_ERROR(o.download(&images->o, cuda_stream, "download O image"));
  FLASHCHECK_RETURN_IF_ERROR(lse.download(&images->lse, cuda_stream, "download LSE image"));
  FLASHCHECK_RETURN_IF_ERROR(m.download(&images->m, cuda_stream, "download m image"));
  FLASHCHECK_RETURN_IF_ERROR(l.download(&images->l, cuda_stream, "download l image"));
  std::vector<uint8_t> q_after(inputs.q.size()), k_after(inputs.k.size()), v_after(inputs.v.size());
  FLASHCHECK_RETURN_IF_ERROR(q.download(&q_after, cuda_stream, "download q"));
  FLASHCHECK_RETURN_IF_ERROR(k.download(&k_after, cuda_stream, "download k"));
  FLASHCHECK_RETURN_IF_ERROR(v.download(&v_after, cuda_stream, "download v"));
  if (cudaError_t e = cudaStreamSynchronize(cuda_stream); e != cudaSuccess) return cuda_status(e, "download");
  uint64_t hash = fnv1a64(q_after.data(), q_after.size());
  hash = fnv1a64(k_after.data(), k_after.size(), hash);
  *input_hash_after = fnv1a64(v_after.data(), v_after.size(), hash);
  return call_status;
}

#else  // no CUDA

Status run_on_gpu(const HostInputs&, Params, OutputImages*, bool, void*, uint64_t*) {
  return {StatusCode::kNoDevice, "flashcheck was built without CUDA (FLASHCHECK_CUDA=OFF): no GPU backend"};
}

#endif

}  // namespace detail
}  // namespace flashcheck
