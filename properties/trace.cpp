// Per-tile traces (see trace.h). The GPU path owns its device buffers with a small RAII holder and copies
// only what the invariants need back; O and LSE come from the harness's guarded runner instead.
#include "trace.h"

#include <bit>
#include <cstring>
#include <memory>
#include <string>

#if FLASHCHECK_TRACE_GPU
#include <cuda_runtime.h>
#endif

namespace flashcheck::properties {
namespace {

void poison(std::vector<float>* xs, size_t n) { xs->assign(n, std::bit_cast<float>(kTracePoisonBits)); }

#if FLASHCHECK_TRACE_GPU
// One device allocation, freed on scope exit.
struct DeviceBuffer {
  void* ptr = nullptr;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
};

Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::ok_status();
  return {StatusCode::kCudaError, std::string(what) + ": " + cudaGetErrorString(err)};
}

// Allocates `bytes` (at least 1) and copies `src` (may be null) into it.
Status upload(DeviceBuffer* buf, const void* src, size_t bytes) {
  if (Status st = cuda_status(cudaMalloc(&buf->ptr, bytes ? bytes : 1), "cudaMalloc"); !st.ok()) return st;
  if (src && bytes) return cuda_status(cudaMemcpy(buf->ptr, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  return Status::ok_status();
}

Status download(void* dst, const DeviceBuffer& buf, size_t bytes) {
  if (!bytes) return Status::ok_status();
  return cuda_status(cudaMemcpy(dst, buf.ptr, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}

Status run_traced_gpu(const HostInputs& in, Trace* trace) {
  const Params& hp = in.params;
  const size_t rows = static_cast<size_t>(hp.batch * hp.heads_q * hp.seqlen_q);
  const size_t slots = trace->m.size();
  DeviceBuffer q, k, v, o, lse, trace_rows, trace_m, trace_l, kinds, buckets;
  Status st;
  // O laid out like Q (same strides, as make_inputs sets them).
  if (!(st = upload(&q, in.q.data(), in.q.size())).ok() || !(st = upload(&k, in.k.data(), in.k.size())).ok() ||
      !(st = upload(&v, in.v.data(), in.v.size())).ok() || !(st = upload(&o, nullptr, in.q.size())).ok() ||
      !(st = upload(&lse, nullptr, rows * sizeof(float))).ok() ||
      !(st = upload(&trace_rows, trace->rows.data(), trace->rows.size() * sizeof(int64_t))).ok() ||
      !(st = upload(&trace_m, trace->m.data(), slots * sizeof(float))).ok() ||
      !(st = upload(&trace_l, trace->l.data(), slots * sizeof(float))).ok() ||
      !(st = upload(&kinds, trace->tile_kind_counts.data(), kTileKindCount * sizeof(uint64_t))).ok() ||
      !(st = upload(&buckets, trace->rescale_buckets.data(), kRescaleBuckets * sizeof(uint64_t))).ok()) {
    return st;
  }
  Params p = hp;
  p.q = q.ptr;
  p.k = k.ptr;
  p.v = v.ptr;
  p.o = o.ptr;
  p.lse = static_cast<float*>(lse.ptr);
  Instrumentation inst;
  inst.trace_rows = static_cast<const int64_t*>(trace_rows.ptr);
  inst.trace_row_count = static_cast<int32_t>(trace->rows.size());
  inst.max_tiles = trace->max_tiles;
  inst.trace_m = static_cast<float*>(trace_m.ptr);
  inst.trace_l = static_cast<float*>(trace_l.ptr);
  inst.tile_kind_counts = static_cast<uint64_t*>(kinds.ptr);
  inst.rescale_buckets = static_cast<uint64_t*>(buckets.ptr);
  if (!(st = run_instrumented(p, inst)).ok()) return st;
  if (!(st = cuda_status(cudaDeviceSynchronize(), "kernel")).ok()) return st;
  if (!(st = download(trace->m.data(), trace_m, slots * sizeof(float))).ok() ||
      !(st = download(trace->l.data(), trace_l, slots * sizeof(float))).ok() ||
      !(st = download(trace->tile_kind_counts.data(), kinds, kTileKindCount * sizeof(uint64_t))).ok() ||
      !(st = download(trace->rescale_buckets.data(), buckets, kRescaleBuckets * sizeof(uint64_t))).ok()) {
    return st;
  }
  return Status::ok_status();
}
#endif

}  // namespace

bool is_trace_poison(float x) { return std::bit_cast<uint32_t>(x) == kTracePoisonBits; }

Status run_traced(const HostInputs& in, Backend backend, ModelDefect defect, Trace* trace) {
  const size_t slots = trace->rows.size() * static_cast<size_t>(trace->max_tiles);
  poison(&trace->m, slots);
  poison(&trace->l, slots);
  if (backend == Backend::kGpu) {
#if FLASHCHECK_TRACE_GPU
    return run_traced_gpu(in, trace);
#else
    return {StatusCode::kUnsupported, "per-tile traces on the GPU need the instrumented property binary"};
#endif
  }
  Params p = in.params;
  p.q = in.q.data();
  p.k = in.k.data();
  p.v = in.v.data();
  std::vector<uint8_t> o(in.q.size());  // O laid out like Q
  std::vector<float> lse(static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q));
  p.o = o.empty() ? nullptr : o.data();
  p.lse = lse.empty() ? nullptr : lse.data();
  HostModelOptions options;
  options.defect = defect;
  Instrumentation& inst = options.instrumentation;
  inst.trace_rows = trace->rows.data();
  inst.trace_row_count = static_cast<int32_t>(trace->rows.size());
  inst.max_tiles = trace->max_tiles;
  inst.trace_m = trace->m.data();
  inst.trace_l = trace->l.data();
  inst.tile_kind_counts = trace->tile_kind_counts.data();
  inst.rescale_buckets = trace->rescale_buckets.data();
  return run_host_model(p, options);
}

}  // namespace flashcheck::properties
