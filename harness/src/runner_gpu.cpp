// GPU backend of the runner, through the CUDA runtime API (host code, no kernels here). Compiled once per
// kernel library: into flashcheck_harness against run() of the production kernel, and with
// FLASHCHECK_HARNESS_INSTRUMENTED=1 against run_instrumented() (flashcheck_harness_instrumented; the fuzz
// build's mutant harness too), which records the instrumentation RunOptions asks for.
// Every buffer of a run lives in one slot of a DevicePool: the caller's (kept between runs, grow only) or
// one of the run's own, freed when it ends. Without CUDA (FLASHCHECK_HARNESS_CUDA=0) every run is kNoDevice.
#include <array>
#include <cstring>
#include <string>

#include "flashcheck/backward.h"
#include "flashcheck/instrument.h"
#include "flashcheck/runner.h"
#include "runner_internal.h"

#if FLASHCHECK_HARNESS_CUDA
#include <cuda_runtime.h>

#include "cuda_status.h"
#endif

#ifndef FLASHCHECK_HARNESS_INSTRUMENTED
#define FLASHCHECK_HARNESS_INSTRUMENTED 0
#endif

namespace flashcheck {

bool gpu_instrumentation_linked() { return FLASHCHECK_HARNESS_INSTRUMENTED != 0; }

namespace {
// The buffers of a run, one device allocation each.
enum class Slot : int {
  kQ, kK, kV, kTraceRows, kO, kLse, kM, kL, kTileKinds, kRescale, kTraceM, kTraceL, kSink,
  kCuSeqlensQ, kCuSeqlensK, kSequsedK, kPageTable, kDOut, kDq, kDk, kDv, kDsink, kDropoutMask, kDescaleQ, kDescaleK,
  kDescaleV, kCount
};
}  // namespace

// A slot grows (free, then allocate the larger size) and never shrinks.
struct DevicePool::Slots {
  struct Allocation {
    void* ptr = nullptr;
    size_t capacity = 0;
  };
  std::array<Allocation, static_cast<size_t>(Slot::kCount)> allocations;
  Allocation& operator[](Slot slot) { return allocations[static_cast<size_t>(slot)]; }
};

DevicePool::DevicePool() : slots_(std::make_unique<Slots>()) {}

DevicePool::~DevicePool() {
#if FLASHCHECK_HARNESS_CUDA
  for (Slots::Allocation& a : slots_->allocations) {
    if (a.ptr != nullptr) cudaFree(a.ptr);
  }
#endif
}

namespace detail {

#if FLASHCHECK_HARNESS_CUDA
// Every CUDA step returns its Status (cuda_status.h); the first failure ends the run (a run's own pool frees itself).
namespace {

// The device side of one run: each host buffer uploaded into its slot, downloaded back from it.
class DeviceRun {
 public:
  DeviceRun(DevicePool* pool, cudaStream_t stream) : pool_(pool != nullptr ? pool : &own_), stream_(stream) {}

  // Allocates (or reuses) the slot and uploads `bytes`; an empty buffer gets no memory and a null pointer,
  // as the API allows for empty tensors.
  Status upload(Slot slot, const void* bytes, size_t size, const char* name) {
    DevicePool::Slots::Allocation& a = pool_->slots()[slot];
    sizes_[static_cast<size_t>(slot)] = size;
    if (size == 0) return Status::ok_status();
    if (size > a.capacity) {
      if (a.ptr != nullptr) cudaFree(a.ptr);
      a.ptr = nullptr;
      a.capacity = 0;
      if (cudaError_t e = cudaMalloc(&a.ptr, size); e != cudaSuccess) return cuda_status(e, name);
      a.capacity = size;
    }
    if (cudaError_t e = cudaMemcpyAsync(a.ptr, bytes, size, cudaMemcpyHostToDevice, stream_); e != cudaSuccess) {
      return cuda_status(e, name);
    }
    return Status::ok_status();
  }
  Status upload(Slot slot, const std::vector<uint8_t>& bytes, const char* name) {
    return upload(slot, bytes.data(), bytes.size(), name);
  }
  // Copies the slot's uploaded bytes back into `bytes` (sized as uploaded).
  Status download(Slot slot, std::vector<uint8_t>* bytes, const char* name) {
    const size_t size = sizes_[static_cast<size_t>(slot)];
    if (size == 0) return Status::ok_status();
    if (cudaError_t e = cudaMemcpyAsync(bytes->data(), data(slot), size, cudaMemcpyDeviceToHost, stream_);
        e != cudaSuccess) {
      return cuda_status(e, name);
    }
    return Status::ok_status();
  }
  // Device address of the slot's buffer, or null when nothing was uploaded to it.
  uint8_t* data(Slot slot) {
    return sizes_[static_cast<size_t>(slot)] == 0 ? nullptr : static_cast<uint8_t*>(pool_->slots()[slot].ptr);
  }
  // Start of an image's payload (after the leading guard).
  template <typename T = uint8_t>
  T* payload(Slot slot) {
    uint8_t* base = data(slot);
    return base == nullptr ? nullptr : reinterpret_cast<T*>(base + kGuardBytes);
  }

 private:
  DevicePool own_;
  DevicePool* pool_;
  cudaStream_t stream_;
  std::array<size_t, static_cast<size_t>(Slot::kCount)> sizes_{};
};

// The images and the slots they travel in, in one list so upload and download cannot disagree: the outputs, and
// the inputs that travel as images (the sink, the index arrays, the descales), whose guards and bytes are checked after
// the run.
struct ImageSlot {
  Slot slot;
  std::vector<uint8_t> OutputImages::*image;
  const char* name;
};
constexpr ImageSlot kImageSlots[] = {
    {Slot::kO, &OutputImages::o, "O image"},
    {Slot::kLse, &OutputImages::lse, "LSE image"},
    {Slot::kM, &OutputImages::m, "m image"},
    {Slot::kL, &OutputImages::l, "l image"},
    {Slot::kTileKinds, &OutputImages::tile_kinds, "tile-kind counters"},
    {Slot::kRescale, &OutputImages::rescale, "rescale buckets"},
    {Slot::kTraceM, &OutputImages::trace_m, "trace m image"},
    {Slot::kTraceL, &OutputImages::trace_l, "trace l image"},
    {Slot::kDropoutMask, &OutputImages::dropout_mask, "dropout mask image"},
    {Slot::kSink, &OutputImages::sink, "sink image"},
    {Slot::kCuSeqlensQ, &OutputImages::cu_seqlens_q, "cu_seqlens_q image"},
    {Slot::kCuSeqlensK, &OutputImages::cu_seqlens_k, "cu_seqlens_k image"},
    {Slot::kSequsedK, &OutputImages::seqused_k, "seqused_k image"},
    {Slot::kPageTable, &OutputImages::page_table, "page_table image"},
    {Slot::kDescaleQ, &OutputImages::descale_q, "descale_q image"},
    {Slot::kDescaleK, &OutputImages::descale_k, "descale_k image"},
    {Slot::kDescaleV, &OutputImages::descale_v, "descale_v image"},
};

}  // namespace

Status run_on_gpu(const HostInputs& inputs, Params params, OutputImages* images, const RunOptions& options,
                  QkvChanged* qkv_changed) {
  if (options.any_instrumentation() && !FLASHCHECK_HARNESS_INSTRUMENTED) {
    return {StatusCode::kUnsupported,
            "GPU instrumentation (row m, l, tile counters, traces) needs flashcheck_harness_instrumented, linked "
            "with flashcheck_kernel_instrumented; this binary links the production kernel"};
  }
  if (!device_available()) return {StatusCode::kNoDevice, "no CUDA device available"};
  cudaStream_t stream = static_cast<cudaStream_t>(options.stream);

  DeviceRun device(options.device_pool, stream);
  FLASHCHECK_RETURN_IF_ERROR(device.upload(Slot::kQ, inputs.q, "upload q"));
  FLASHCHECK_RETURN_IF_ERROR(device.upload(Slot::kK, inputs.k, "upload k"));
  FLASHCHECK_RETURN_IF_ERROR(device.upload(Slot::kV, inputs.v, "upload v"));
  for (const ImageSlot& s : kImageSlots) {
    FLASHCHECK_RETURN_IF_ERROR(device.upload(s.slot, images->*s.image, s.name));
  }
  params.q = device.data(Slot::kQ);
  params.k = device.data(Slot::kK);
  params.v = device.data(Slot::kV);
  params.o = device.payload(Slot::kO);
  params.lse = device.payload<float>(Slot::kLse);
  params.dropout_mask_out = device.payload(Slot::kDropoutMask);  // null without RunOptions::dropout_mask
  params.sink = device.payload<const float>(Slot::kSink);  // null when the inputs have no sink
  // The index arrays live where the tensors do (attention.h); each null when the inputs have none.
  params.cu_seqlens_q = device.payload<const int32_t>(Slot::kCuSeqlensQ);
  params.cu_seqlens_k = device.payload<const int32_t>(Slot::kCuSeqlensK);
  params.seqused_k = device.payload<const int32_t>(Slot::kSequsedK);
  params.page_table = device.payload<const int32_t>(Slot::kPageTable);
  params.descale_q = device.payload<const float>(Slot::kDescaleQ);  // each null when the inputs have no descales
  params.descale_k = device.payload<const float>(Slot::kDescaleK);
  params.descale_v = device.payload<const float>(Slot::kDescaleV);

  Status call_status;
  if (options.device_call) {
    call_status = options.device_call(params, stream);
  } else {
#if FLASHCHECK_HARNESS_INSTRUMENTED
    Instrumentation inst;
    inst.row_m = device.payload<float>(Slot::kM);
    inst.row_l = device.payload<float>(Slot::kL);
    inst.tile_kind_counts = device.payload<uint64_t>(Slot::kTileKinds);
    inst.rescale_buckets = device.payload<uint64_t>(Slot::kRescale);
    if (!images->trace_m.empty()) {
      const size_t row_bytes = images->trace_rows.size() * sizeof(int64_t);
      FLASHCHECK_RETURN_IF_ERROR(
          device.upload(Slot::kTraceRows, images->trace_rows.data(), row_bytes, "upload trace rows"));
      inst.trace_rows = reinterpret_cast<const int64_t*>(device.data(Slot::kTraceRows));
      inst.trace_row_count = static_cast<int32_t>(images->trace_rows.size());
      inst.max_tiles = options.trace_tiles;
      inst.trace_m = device.payload<float>(Slot::kTraceM);
      inst.trace_l = device.payload<float>(Slot::kTraceL);
    }
    call_status = run_instrumented(params, inst, stream);
#else
    call_status = run(params, stream);
#endif
  }
  // Errors during execution surface at the synchronisation; report them even if the launch said ok.
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) return cuda_status(e, "kernel execution");

  // Read everything back, also after a rejected call: the canaries must be intact either way.
  for (const ImageSlot& s : kImageSlots) {
    FLASHCHECK_RETURN_IF_ERROR(device.download(s.slot, &(images->*s.image), s.name));
  }
  std::vector<uint8_t> q_after(inputs.q.size()), k_after(inputs.k.size()), v_after(inputs.v.size());
  FLASHCHECK_RETURN_IF_ERROR(device.download(Slot::kQ, &q_after, "download q"));
  FLASHCHECK_RETURN_IF_ERROR(device.download(Slot::kK, &k_after, "download k"));
  FLASHCHECK_RETURN_IF_ERROR(device.download(Slot::kV, &v_after, "download v"));
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) return cuda_status(e, "download");
  *qkv_changed = {q_after != inputs.q, k_after != inputs.k, v_after != inputs.v};
  return call_status;
}

Status backward_on_gpu(const HostInputs& inputs, BackwardParams params, BackwardImages* images, void* stream_ptr,
                       std::vector<const char*>* changed,
                       const std::function<Status(const BackwardParams&, void* stream)>& call) {
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  DeviceRun device(nullptr, stream);
  const auto as_bytes = [](const auto& values) {
    return std::pair{static_cast<const void*>(values.data()), values.size() * sizeof(values[0])};
  };
  struct Input {
    Slot slot;
    std::pair<const void*, size_t> bytes;
    const char* name;
  };
  const Input uploaded[] = {{Slot::kQ, as_bytes(inputs.q), "q"},
                            {Slot::kK, as_bytes(inputs.k), "k"},
                            {Slot::kV, as_bytes(inputs.v), "v"},
                            {Slot::kDOut, as_bytes(inputs.d_o), "d_o"},
                            {Slot::kSink, as_bytes(inputs.sink), "sink"},
                            {Slot::kCuSeqlensQ, as_bytes(inputs.cu_seqlens_q), "cu_seqlens_q"},
                            {Slot::kCuSeqlensK, as_bytes(inputs.cu_seqlens_k), "cu_seqlens_k"},
                            {Slot::kSequsedK, as_bytes(inputs.seqused_k), "seqused_k"}};
  for (const Input& in : uploaded) FLASHCHECK_RETURN_IF_ERROR(device.upload(in.slot, in.bytes.first, in.bytes.second, in.name));
  struct Image {
    Slot slot;
    std::vector<uint8_t>* image;
    const char* name;
  };
  const Image round_trip[] = {{Slot::kO, &images->o, "O image"},     {Slot::kLse, &images->lse, "LSE image"},
                              {Slot::kDq, &images->dq, "dQ image"},  {Slot::kDk, &images->dk, "dK image"},
                              {Slot::kDv, &images->dv, "dV image"},  {Slot::kDsink, &images->dsink, "dsink image"}};
  for (const Image& im : round_trip) FLASHCHECK_RETURN_IF_ERROR(device.upload(im.slot, *im.image, im.name));
  Params& p = params.forward;
  p.q = device.data(Slot::kQ);
  p.k = device.data(Slot::kK);
  p.v = device.data(Slot::kV);
  p.sink = reinterpret_cast<const float*>(device.data(Slot::kSink));
  p.cu_seqlens_q = reinterpret_cast<const int32_t*>(device.data(Slot::kCuSeqlensQ));
  p.cu_seqlens_k = reinterpret_cast<const int32_t*>(device.data(Slot::kCuSeqlensK));
  p.seqused_k = reinterpret_cast<const int32_t*>(device.data(Slot::kSequsedK));
  p.o = device.payload(Slot::kO);
  p.lse = device.payload<float>(Slot::kLse);
  params.d_o = device.data(Slot::kDOut);
  params.dq = device.payload(Slot::kDq);
  params.dk = device.payload(Slot::kDk);
  params.dv = device.payload(Slot::kDv);
  params.dsink = device.payload<float>(Slot::kDsink);
  const Status call_status = call ? call(params, stream) : run_backward(params, stream);
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) return cuda_status(e, "run_backward");
  if (!call_status.ok()) return call_status;
  for (const Image& im : round_trip) FLASHCHECK_RETURN_IF_ERROR(device.download(im.slot, im.image, im.name));
  for (const Input& in : uploaded) {
    std::vector<uint8_t> after(in.bytes.second);
    FLASHCHECK_RETURN_IF_ERROR(device.download(in.slot, &after, in.name));
    if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) return cuda_status(e, "download");
    if (in.bytes.second > 0 && std::memcmp(after.data(), in.bytes.first, in.bytes.second) != 0) changed->push_back(in.name);
  }
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) return cuda_status(e, "download");
  return Status::ok_status();
}

#else  // no CUDA

Status run_on_gpu(const HostInputs&, Params, OutputImages*, const RunOptions&, QkvChanged*) {
  return {StatusCode::kNoDevice, "flashcheck was built without CUDA (FLASHCHECK_CUDA=OFF): no GPU backend"};
}

Status backward_on_gpu(const HostInputs&, BackwardParams, BackwardImages*, void*, std::vector<const char*>*,
                       const std::function<Status(const BackwardParams&, void* stream)>&) {
  return {StatusCode::kNoDevice, "flashcheck was built without CUDA (FLASHCHECK_CUDA=OFF): no GPU backend"};
}

#endif

}  // namespace detail
}  // namespace flashcheck
