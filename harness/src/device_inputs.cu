// Device inputs (device_inputs.h): Q, K and V of a dense case generated on the GPU by element_values.h, the
// definition make_inputs uses on the host; compiled with -fmad=false (no contraction: the device's double + - * /
// sqrt round like the host's, so every element has the host's bits). The run of a case on them: O and LSE poisoned
// and guarded, flashcheck's run(), the requested rows downloaded, and the guards checked on the device (unwritten
// elements over all of O and LSE, O's padding and guards, every input element regenerated and compared).
// Every pass walks a buffer slot by slot: slot p of a dense [B, H, S, R] (bhsd) or [B, S, H, R] (bshd) buffer with
// R = head_dim + pad is element (b, h, s, d) when d = p mod R < head_dim, padding otherwise.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "cuda_status.h"
#include "element_values.h"
#include "flashcheck/device_inputs.h"
#include "flashcheck/runner.h"

namespace flashcheck {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 8192;  // grid-stride beyond this: enough blocks to fill any current GPU

// A dense tensor's buffer: [B, H, S, R] or [B, S, H, R] slots of esize bytes.
struct DenseLayout {
  int64_t heads = 0, seqlen = 0, head_dim = 0, row_elems = 0, slots = 0;
  bool bshd = false;
  int esize = 2;

  // Element (b, h, s, d) of slot p and whether it is one (false: padding). The canonical index is
  // ((b * heads + h) * seqlen + s) * head_dim + d.
  __device__ bool locate(int64_t p, int64_t* bh, int64_t* s, int64_t* d) const {
    *d = p % row_elems;
    const int64_t r = p / row_elems;
    if (bshd) {
      const int64_t h = r % heads, bs = r / heads;
      *s = bs % seqlen;
      *bh = (bs / seqlen) * heads + h;
    } else {
      *s = r % seqlen;
      *bh = r / seqlen;
    }
    return *d < head_dim;
  }
  __device__ int64_t canonical(int64_t bh, int64_t s, int64_t d) const { return (bh * seqlen + s) * head_dim + d; }
};

DenseLayout dense_layout(const Case& c, char tensor) {
  DenseLayout t;
  t.heads = tensor == 'q' ? c.heads_q : c.heads_kv;
  t.seqlen = tensor == 'q' ? c.seqlen_q : c.seqlen_k;
  t.head_dim = c.head_dim;
  t.row_elems = c.head_dim + c.pad;
  t.slots = c.batch * t.heads * t.seqlen * t.row_elems;
  t.bshd = c.layout == Layout::kBSHD;
  t.esize = static_cast<int>(dtype_size(c.dtype));
  return t;
}

__device__ uint32_t load_slot(const uint8_t* buffer, int64_t p, int esize) {
  if (esize == 2) return reinterpret_cast<const uint16_t*>(buffer)[p];
  return reinterpret_cast<const uint32_t*>(buffer)[p];
}
__device__ void store_slot(uint8_t* buffer, int64_t p, int esize, uint32_t bits) {
  if (esize == 2) {
    reinterpret_cast<uint16_t*>(buffer)[p] = static_cast<uint16_t>(bits);
  } else {
    reinterpret_cast<uint32_t*>(buffer)[p] = bits;
  }
}

// Every slot: an element by its rule, padding by pad_bits.
__global__ void generate_kernel(elements::ElementRule rule, DenseLayout t, uint32_t pad_bits, uint8_t* buffer) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t p = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; p < t.slots; p += stride) {
    int64_t bh = 0, s = 0, d = 0;
    uint32_t bits = pad_bits;
    if (t.locate(p, &bh, &s, &d)) {
      bits = elements::element_bits(rule, s, t.canonical(bh, s, d), elements::dominant_row(rule, bh));
    }
    store_slot(buffer, p, t.esize, bits);
  }
}

// Every element of a canonical [BH, S, D] array (no padding): draw_on_device.
__global__ void draw_kernel(elements::ElementRule rule, int64_t seqlen, int64_t head_dim, int64_t count, int esize,
                            uint8_t* bits) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t p = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; p < count; p += stride) {
    const int64_t row = p / head_dim;
    store_slot(bits, p, esize, elements::element_bits(rule, row % seqlen, p, elements::dominant_row(rule, row / seqlen)));
  }
}

// Counts the slots that differ from what generate_kernel writes (injected elements excepted by the caller's count).
__global__ void count_changed_kernel(elements::ElementRule rule, DenseLayout t, uint32_t pad_bits,
                                     const uint8_t* buffer, unsigned long long* changed) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t base = int64_t{blockIdx.x} * blockDim.x; base < t.slots; base += stride) {
    const int64_t p = base + threadIdx.x;
    bool differs = false;
    if (p < t.slots) {
      int64_t bh = 0, s = 0, d = 0;
      uint32_t bits = pad_bits;
      if (t.locate(p, &bh, &s, &d)) {
        bits = elements::element_bits(rule, s, t.canonical(bh, s, d), elements::dominant_row(rule, bh));
      }
      differs = load_slot(buffer, p, t.esize) != bits;
    }
    const int count = __syncthreads_count(differs);
    if (threadIdx.x == 0 && count > 0) atomicAdd(changed, static_cast<unsigned long long>(count));
  }
}

// O before the run: elements poisoned, padding canaried (byte by byte kCanaryByte).
__global__ void poison_output_kernel(DenseLayout t, uint32_t poison_bits, uint32_t canary_bits, uint8_t* buffer) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t p = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; p < t.slots; p += stride) {
    int64_t bh = 0, s = 0, d = 0;
    store_slot(buffer, p, t.esize, t.locate(p, &bh, &s, &d) ? poison_bits : canary_bits);
  }
}

// O after the run: elements still holding the poison, padding slots no longer canary.
__global__ void scan_output_kernel(DenseLayout t, uint32_t poison_bits, uint32_t canary_bits, const uint8_t* buffer,
                                   unsigned long long* unwritten, unsigned long long* damaged) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t base = int64_t{blockIdx.x} * blockDim.x; base < t.slots; base += stride) {
    const int64_t p = base + threadIdx.x;
    bool poison = false, damage = false;
    if (p < t.slots) {
      int64_t bh = 0, s = 0, d = 0;
      const uint32_t bits = load_slot(buffer, p, t.esize);
      if (t.locate(p, &bh, &s, &d)) {
        poison = bits == poison_bits;
      } else {
        damage = bits != canary_bits;
      }
    }
    const int poison_count = __syncthreads_count(poison);
    const int damage_count = __syncthreads_count(damage);
    if (threadIdx.x == 0) {
      if (poison_count > 0) atomicAdd(unwritten, static_cast<unsigned long long>(poison_count));
      if (damage_count > 0) atomicAdd(damaged, static_cast<unsigned long long>(damage_count));
    }
  }
}

// fp32 slots: fill with `bits`, or count those equal to `bits`.
__global__ void fill_u32_kernel(uint32_t* buffer, int64_t count, uint32_t bits) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t p = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; p < count; p += stride) buffer[p] = bits;
}
__global__ void count_u32_kernel(const uint32_t* buffer, int64_t count, uint32_t bits, unsigned long long* equal) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t base = int64_t{blockIdx.x} * blockDim.x; base < count; base += stride) {
    const int64_t p = base + threadIdx.x;
    const int n = __syncthreads_count(p < count && buffer[p] == bits);
    if (threadIdx.x == 0 && n > 0) atomicAdd(equal, static_cast<unsigned long long>(n));
  }
}

unsigned blocks_for(int64_t slots) {
  return static_cast<unsigned>(std::clamp<int64_t>((slots + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

uint32_t pad_bits_of(DType dtype) { return input_pad_bits(dtype); }
uint32_t poison_bits_of(DType dtype) { return dtype_size(dtype) == 4 ? kPoisonBits32 : kPoisonBits16; }
uint32_t canary_bits_of(DType dtype) {
  return dtype_size(dtype) == 4 ? 0x01010101u * kCanaryByte : 0x0101u * kCanaryByte;
}

// One device allocation, freed by its owner.
struct DeviceBuffer {
  void* ptr = nullptr;
  ~DeviceBuffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
  uint8_t* bytes() const { return static_cast<uint8_t*>(ptr); }
};

// The counter a reduction kernel adds into, read back after the stream's work.
class DeviceCounter {
 public:
  Status reset(cudaStream_t stream) {
    if (buffer_.ptr == nullptr) FLASHCHECK_CUDA_TRY(cudaMalloc(&buffer_.ptr, sizeof(unsigned long long)), "counter");
    FLASHCHECK_CUDA_TRY(cudaMemsetAsync(buffer_.ptr, 0, sizeof(unsigned long long), stream), "counter");
    return Status::ok_status();
  }
  unsigned long long* get() const { return static_cast<unsigned long long*>(buffer_.ptr); }
  Status read(cudaStream_t stream, int64_t* value) {
    unsigned long long host = 0;
    FLASHCHECK_CUDA_TRY(cudaMemcpyAsync(&host, buffer_.ptr, sizeof(host), cudaMemcpyDeviceToHost, stream), "counter");
    FLASHCHECK_CUDA_TRY(cudaStreamSynchronize(stream), "counter");
    *value = static_cast<int64_t>(host);
    return Status::ok_status();
  }

 private:
  DeviceBuffer buffer_;
};

Status memory_short_status(int64_t needed, int64_t free_bytes) {
  return {StatusCode::kNoDevice, "device memory: the case needs " + std::to_string(needed) + " bytes, the device has " +
                                     std::to_string(free_bytes) + " free"};
}

// Free device memory, or -1 when it cannot be read.
int64_t free_device_bytes() {
  size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) return -1;
  return static_cast<int64_t>(free_bytes);
}

Status generate_tensor(const Case& c, char tensor, void* buffer, cudaStream_t stream) {
  const DenseLayout t = dense_layout(c, tensor);
  if (t.slots == 0) return Status::ok_status();
  generate_kernel<<<blocks_for(t.slots), kThreads, 0, stream>>>(elements::tensor_rule(c, tensor), t,
                                                               pad_bits_of(c.dtype), static_cast<uint8_t*>(buffer));
  FLASHCHECK_CUDA_TRY(cudaGetLastError(), std::string("generate ") + tensor);
  return Status::ok_status();
}

// draw_on_device's device buffer, per host thread, grown as needed and kept for the next case (a cudaMalloc per
// case would cost more than the draw), on the device it was allocated on (a thread that changes device gets a new
// one). Not freed at the thread's end: freeing during the process's exit would race the CUDA runtime's teardown.
struct DrawScratch {
  void* ptr = nullptr;
  size_t bytes = 0;
  int device = -1;
};
thread_local DrawScratch t_draw_scratch;

// Byte offset of element (b, h, s, d) of a dense tensor with `strides`.
int64_t element_offset(const Strides& strides, int64_t esize, int64_t b, int64_t h, int64_t s, int64_t d) {
  return (b * strides.batch + h * strides.head + s * strides.row + d) * esize;
}

}  // namespace

Status draw_on_device(const Case& c, char tensor, std::vector<uint8_t>* bits) {
  if (!device_available()) return {StatusCode::kNoDevice, "no CUDA device available"};
  const int64_t heads = tensor == 'q' ? c.heads_q : c.heads_kv;
  const int64_t seqlen = tensor == 'q' ? c.seqlen_q : c.seqlen_k;
  const int64_t columns = tensor == 'v' ? c.value_dim() : c.head_dim;
  const int esize = static_cast<int>(dtype_size(c.dtype));
  bits->clear();
  // An empty tensor has nothing to draw, however large its other extents.
  if (c.batch == 0 || heads == 0 || seqlen == 0 || columns == 0) return Status::ok_status();
  int64_t count = 0, bytes = 0;
  if (c.batch < 0 || heads < 0 || seqlen < 0 || columns < 0 || __builtin_mul_overflow(c.batch, heads, &count) ||
      __builtin_mul_overflow(count, seqlen, &count) || __builtin_mul_overflow(count, columns, &count) ||
      __builtin_mul_overflow(count, int64_t{esize}, &bytes)) {
    return {StatusCode::kInvalidArgument, std::string("draw_on_device: tensor ") + tensor + " has more than 2^63 bytes"};
  }
  bits->resize(static_cast<size_t>(bytes));
  // An error left by an earlier call is that call's, not the draw's: name it so.
  if (cudaError_t pending = cudaGetLastError(); pending != cudaSuccess) {
    return detail::cuda_status(pending, "an earlier CUDA call (pending before the draw)");
  }
  int device = 0;
  FLASHCHECK_CUDA_TRY(cudaGetDevice(&device), "draw buffer");
  DrawScratch& scratch = t_draw_scratch;
  if (scratch.bytes < bits->size() || scratch.device != device) {
    if (scratch.ptr != nullptr) FLASHCHECK_CUDA_TRY(cudaFree(scratch.ptr), "draw buffer");
    scratch = {};
    FLASHCHECK_CUDA_TRY(cudaMalloc(&scratch.ptr, bits->size()), "draw buffer");
    scratch.bytes = bits->size();
    scratch.device = device;
  }
  draw_kernel<<<blocks_for(count), kThreads>>>(elements::tensor_rule(c, tensor), seqlen, columns, count, esize,
                                               static_cast<uint8_t*>(scratch.ptr));
  FLASHCHECK_CUDA_TRY(cudaGetLastError(), std::string("draw ") + tensor);
  FLASHCHECK_CUDA_TRY(cudaMemcpy(bits->data(), scratch.ptr, bits->size(), cudaMemcpyDeviceToHost),
                      std::string("read back ") + tensor);
  return Status::ok_status();
}

DeviceInputs::~DeviceInputs() { release(); }

DeviceInputs::DeviceInputs(DeviceInputs&& other) noexcept { *this = std::move(other); }

DeviceInputs& DeviceInputs::operator=(DeviceInputs&& other) noexcept {
  if (this != &other) {
    release();
    params = other.params;
    q_bytes = other.q_bytes;
    kv_bytes = other.kv_bytes;
    sink = std::move(other.sink);
    sink_exact = std::move(other.sink_exact);
    other.params.q = other.params.k = other.params.v = nullptr;
    other.params.sink = nullptr;
  }
  return *this;
}

void DeviceInputs::release() {
  for (const void* p : {params.q, params.k, params.v, static_cast<const void*>(params.sink)}) {
    if (p != nullptr) cudaFree(const_cast<void*>(p));
  }
  params.q = params.k = params.v = nullptr;
  params.sink = nullptr;
}

Status make_device_inputs(const Case& c, DeviceInputs* out) {
  if (Status s = check_device_inputs_case(c); !s.ok()) return s;
  if (!device_available()) return {StatusCode::kNoDevice, "no CUDA device available"};
  const DenseLayout q = dense_layout(c, 'q'), kv = dense_layout(c, 'k');
  const int64_t esize = dtype_size(c.dtype);
  const int64_t needed = (q.slots + 2 * kv.slots) * esize;
  if (const int64_t free_bytes = free_device_bytes(); free_bytes >= 0 && needed > free_bytes) {
    return memory_short_status(needed, free_bytes);
  }
  DeviceInputs in;
  in.params = case_params(c);
  in.q_bytes = q.slots * esize;
  in.kv_bytes = kv.slots * esize;
  void* q_ptr = nullptr;
  void* k_ptr = nullptr;
  void* v_ptr = nullptr;
  // Each allocation is owned by `in` as soon as it exists (release() frees it on any early return).
  if (in.q_bytes > 0) {
    FLASHCHECK_CUDA_TRY(cudaMalloc(&q_ptr, static_cast<size_t>(in.q_bytes)), "allocate q");
    in.params.q = q_ptr;
  }
  if (in.kv_bytes > 0) {
    FLASHCHECK_CUDA_TRY(cudaMalloc(&k_ptr, static_cast<size_t>(in.kv_bytes)), "allocate k");
    in.params.k = k_ptr;
    FLASHCHECK_CUDA_TRY(cudaMalloc(&v_ptr, static_cast<size_t>(in.kv_bytes)), "allocate v");
    in.params.v = v_ptr;
  }
  const cudaStream_t stream = nullptr;
  if (Status s = generate_tensor(c, 'q', q_ptr, stream); !s.ok()) return s;
  if (Status s = generate_tensor(c, 'k', k_ptr, stream); !s.ok()) return s;
  if (Status s = generate_tensor(c, 'v', v_ptr, stream); !s.ok()) return s;
  // Injections, element by element, after generation (make_inputs' order).
  for (const Injection& inj : c.inject) {
    const bool is_q = inj.tensor == 'q';
    void* base = is_q ? q_ptr : inj.tensor == 'k' ? k_ptr : v_ptr;
    const Strides& strides = is_q ? in.params.q_stride : in.params.k_stride;
    const uint32_t bits = encode_dtype(c.dtype, inj.value);
    const uint16_t bits16 = static_cast<uint16_t>(bits);
    const void* src = esize == 2 ? static_cast<const void*>(&bits16) : static_cast<const void*>(&bits);
    FLASHCHECK_CUDA_TRY(cudaMemcpy(static_cast<uint8_t*>(base) + element_offset(strides, esize, inj.b, inj.h, inj.s, inj.d),
                                   src, static_cast<size_t>(esize), cudaMemcpyHostToDevice),
                        "inject");
  }
  make_sink(c, &in.sink, &in.sink_exact);
  if (!in.sink.empty()) {
    void* sink_ptr = nullptr;
    FLASHCHECK_CUDA_TRY(cudaMalloc(&sink_ptr, in.sink.size() * sizeof(float)), "allocate sink");
    in.params.sink = static_cast<const float*>(sink_ptr);
    FLASHCHECK_CUDA_TRY(cudaMemcpy(sink_ptr, in.sink.data(), in.sink.size() * sizeof(float), cudaMemcpyHostToDevice),
                        "upload sink");
  }
  FLASHCHECK_CUDA_TRY(cudaDeviceSynchronize(), "generate inputs");
  *out = std::move(in);
  return Status::ok_status();
}

Status download_device_inputs(const DeviceInputs& in, std::vector<uint8_t>* q, std::vector<uint8_t>* k,
                              std::vector<uint8_t>* v) {
  const std::pair<const void*, std::vector<uint8_t>*> copies[] = {{in.params.q, q}, {in.params.k, k}, {in.params.v, v}};
  const int64_t sizes[] = {in.q_bytes, in.kv_bytes, in.kv_bytes};
  for (size_t i = 0; i < 3; ++i) {
    copies[i].second->resize(static_cast<size_t>(sizes[i]));
    if (sizes[i] == 0) continue;
    FLASHCHECK_CUDA_TRY(cudaMemcpy(copies[i].second->data(), copies[i].first, static_cast<size_t>(sizes[i]),
                                   cudaMemcpyDeviceToHost),
                        "download inputs");
  }
  return Status::ok_status();
}

namespace {

// run_sampled_on_device's work; `result` carries what it found so far.
Status run_sampled(const Case& c, std::span<const oracle::RowRef> rows, cudaStream_t stream, SampledRun* result) {
  if (!device_available()) return {StatusCode::kNoDevice, "no CUDA device available"};
  if (output_dtype(c.dtype) != c.dtype || c.descale) {
    return {StatusCode::kUnsupported, std::string("dtype: the device-drawn path holds O like Q in the input dtype, and "
                                                  "no descales (got ") + to_string(c.dtype) + ")"};
  }
  const int64_t needed = device_case_bytes(c);
  if (const int64_t free_bytes = free_device_bytes(); free_bytes >= 0 && needed > free_bytes) {
    result->device_memory_short = true;
    result->device_bytes_needed = needed;
    result->device_bytes_free = free_bytes;
    return memory_short_status(needed, free_bytes);
  }
  DeviceInputs in;
  if (Status s = make_device_inputs(c, &in); !s.ok()) return s;
  const DType dtype = c.dtype;
  const int64_t esize = dtype_size(dtype);
  const DenseLayout o_layout = dense_layout(c, 'q');
  const int64_t lse_count = c.batch * c.heads_q * c.seqlen_q;
  const int64_t lse_bytes = lse_count * int64_t{sizeof(float)};
  const size_t o_image_bytes = static_cast<size_t>(2 * kGuardBytes + in.q_bytes);
  const size_t lse_image_bytes = static_cast<size_t>(2 * kGuardBytes + lse_bytes);

  // O and LSE images: kGuardBytes of canary either side of the payload; O's elements and LSE poisoned.
  DeviceBuffer o_image, lse_image;
  FLASHCHECK_CUDA_TRY(cudaMalloc(&o_image.ptr, o_image_bytes), "allocate O");
  FLASHCHECK_CUDA_TRY(cudaMalloc(&lse_image.ptr, lse_image_bytes), "allocate LSE");
  FLASHCHECK_CUDA_TRY(cudaMemsetAsync(o_image.ptr, kCanaryByte, o_image_bytes, stream), "canary O");
  FLASHCHECK_CUDA_TRY(cudaMemsetAsync(lse_image.ptr, kCanaryByte, lse_image_bytes, stream), "canary LSE");
  uint8_t* const o = o_image.bytes() + kGuardBytes;
  uint32_t* const lse = reinterpret_cast<uint32_t*>(lse_image.bytes() + kGuardBytes);
  const uint32_t poison = poison_bits_of(dtype), canary = canary_bits_of(dtype);
  if (o_layout.slots > 0) {
    poison_output_kernel<<<blocks_for(o_layout.slots), kThreads, 0, stream>>>(o_layout, poison, canary, o);
  }
  if (lse_count > 0) fill_u32_kernel<<<blocks_for(lse_count), kThreads, 0, stream>>>(lse, lse_count, kPoisonBits32);
  FLASHCHECK_CUDA_TRY(cudaGetLastError(), "poison outputs");

  Params params = in.params;
  params.o = o;
  params.lse = reinterpret_cast<float*>(lse);
  result->config = select_config(params);
  result->splits = effective_splits(params);
  const Status call = run(params, stream);
  // Errors during execution surface at the synchronisation; report them even if the launch said ok.
  FLASHCHECK_CUDA_TRY(cudaStreamSynchronize(stream), "kernel execution");

  // The guards, whether or not the call ran: a rejected call must not have written anything either.
  DeviceCounter unwritten, damaged, changed;
  FLASHCHECK_RETURN_IF_ERROR(unwritten.reset(stream));
  FLASHCHECK_RETURN_IF_ERROR(damaged.reset(stream));
  if (o_layout.slots > 0) {
    scan_output_kernel<<<blocks_for(o_layout.slots), kThreads, 0, stream>>>(o_layout, poison, canary, o,
                                                                           unwritten.get(), damaged.get());
  }
  FLASHCHECK_CUDA_TRY(cudaGetLastError(), "scan O");
  int64_t padding_damage = 0;
  FLASHCHECK_RETURN_IF_ERROR(unwritten.read(stream, &result->unwritten_o));
  FLASHCHECK_RETURN_IF_ERROR(damaged.read(stream, &padding_damage));
  FLASHCHECK_RETURN_IF_ERROR(unwritten.reset(stream));
  if (lse_count > 0) {
    count_u32_kernel<<<blocks_for(lse_count), kThreads, 0, stream>>>(lse, lse_count, kPoisonBits32, unwritten.get());
  }
  FLASHCHECK_CUDA_TRY(cudaGetLastError(), "scan LSE");
  FLASHCHECK_RETURN_IF_ERROR(unwritten.read(stream, &result->unwritten_lse));
  // Guard regions, first damaged byte relative to the payload start (negative: before it).
  const std::pair<const DeviceBuffer*, int64_t> images[] = {{&o_image, in.q_bytes}, {&lse_image, lse_bytes}};
  const char* const names[] = {"O", "LSE"};
  std::vector<uint8_t> guard(static_cast<size_t>(kGuardBytes));
  for (size_t i = 0; i < 2 && result->canaries_intact; ++i) {
    for (const int64_t start : {int64_t{0}, kGuardBytes + images[i].second}) {
      FLASHCHECK_CUDA_TRY(cudaMemcpy(guard.data(), images[i].first->bytes() + start, guard.size(), cudaMemcpyDeviceToHost),
                          "download guards");
      const auto bad = std::find_if(guard.begin(), guard.end(), [](uint8_t b) { return b != kCanaryByte; });
      if (bad != guard.end()) {
        result->canaries_intact = false;
        result->damaged_buffer = names[i];
        result->first_damaged_canary = start + (bad - guard.begin()) - kGuardBytes;
        break;
      }
    }
  }
  if (result->canaries_intact && padding_damage > 0) {
    result->canaries_intact = false;
    result->damaged_buffer = "O padding";
  }
  // Inputs: every slot regenerated and compared; the injected elements differ from the generator by design.
  const char* const tensors = "qkv";
  const void* const buffers[] = {in.params.q, in.params.k, in.params.v};
  for (int i = 0; i < 3 && result->inputs_unchanged; ++i) {
    const DenseLayout t = dense_layout(c, tensors[i]);
    if (t.slots == 0) continue;
    FLASHCHECK_RETURN_IF_ERROR(changed.reset(stream));
    count_changed_kernel<<<blocks_for(t.slots), kThreads, 0, stream>>>(
        elements::tensor_rule(c, tensors[i]), t, pad_bits_of(dtype), static_cast<const uint8_t*>(buffers[i]), changed.get());
    FLASHCHECK_CUDA_TRY(cudaGetLastError(), "check inputs");
    int64_t differ = 0;
    FLASHCHECK_RETURN_IF_ERROR(changed.read(stream, &differ));
    int64_t injected = 0;  // injected elements whose bits differ from the generator's
    for (size_t n = 0; n < c.inject.size(); ++n) {
      const Injection& inj = c.inject[n];
      if (inj.tensor != tensors[i]) continue;
      // The last injection at an element is the one it holds.
      const auto same_place = [&](const Injection& later) {
        return later.tensor == inj.tensor && later.b == inj.b && later.h == inj.h && later.s == inj.s && later.d == inj.d;
      };
      if (std::any_of(c.inject.begin() + static_cast<std::ptrdiff_t>(n) + 1, c.inject.end(), same_place)) continue;
      const Strides& strides = i == 0 ? params.q_stride : params.k_stride;
      uint32_t bits = 0;
      FLASHCHECK_CUDA_TRY(cudaMemcpy(&bits, static_cast<const uint8_t*>(buffers[i]) +
                                                element_offset(strides, esize, inj.b, inj.h, inj.s, inj.d),
                                     static_cast<size_t>(esize), cudaMemcpyDeviceToHost),
                          "check injections");
      if (bits != encode_dtype(dtype, inj.value)) {
        result->inputs_unchanged = false;  // an injected element was overwritten
      }
      const elements::ElementRule rule = elements::tensor_rule(c, tensors[i]);
      const int64_t heads = i == 0 ? c.heads_q : c.heads_kv;
      const int64_t bh = inj.b * heads + inj.h;
      const int64_t index = (bh * rule.seqlen + inj.s) * c.head_dim + inj.d;
      injected += elements::element_bits(rule, inj.s, index, elements::dominant_row(rule, bh)) != bits ? 1 : 0;
    }
    if (differ != injected) result->inputs_unchanged = false;
    if (!result->inputs_unchanged) result->modified_input = i == 0 ? "q" : i == 1 ? "k" : "v";
  }
  if (!call.ok()) return call;

  // The requested rows of O and LSE.
  const int64_t head_dim = c.head_dim;
  result->o.assign(rows.size() * static_cast<size_t>(head_dim), 0.0);
  result->lse.assign(rows.size(), 0.0f);
  std::vector<uint8_t> row_bytes(static_cast<size_t>(head_dim * esize));
  for (size_t r = 0; r < rows.size(); ++r) {
    const oracle::RowRef& row = rows[r];
    if (head_dim > 0) {
      FLASHCHECK_CUDA_TRY(cudaMemcpy(row_bytes.data(), o + element_offset(params.o_stride, esize, row.b, row.h, row.i, 0),
                                     row_bytes.size(), cudaMemcpyDeviceToHost),
                          "download O rows");
      for (int64_t d = 0; d < head_dim; ++d) {
        uint32_t bits = 0;
        std::memcpy(&bits, row_bytes.data() + d * esize, static_cast<size_t>(esize));
        result->o[r * static_cast<size_t>(head_dim) + static_cast<size_t>(d)] = decode_dtype(dtype, bits);
      }
    }
    const int64_t flat = (row.b * c.heads_q + row.h) * c.seqlen_q + row.i;
    FLASHCHECK_CUDA_TRY(cudaMemcpy(&result->lse[r], lse + flat, sizeof(float), cudaMemcpyDeviceToHost),
                        "download LSE rows");
  }
  return Status::ok_status();
}

}  // namespace

SampledRun run_sampled_on_device(const Case& c, std::span<const oracle::RowRef> rows, void* stream) {
  SampledRun result;
  if (Status s = check_device_inputs_case(c); !s.ok()) {
    result.status = s;
    return result;
  }
  result.status = run_sampled(c, rows, static_cast<cudaStream_t>(stream), &result);
  return result;
}

}  // namespace flashcheck
