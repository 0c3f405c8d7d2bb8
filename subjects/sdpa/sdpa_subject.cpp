// PyTorch's scaled_dot_product_attention as flashcheck subjects, one library per backend (FC_SDPA_BACKEND:
// sdpa-flash, sdpa-cudnn, sdpa-efficient, sdpa-math), each pinned to its backend through ATen's global switches
// and declaring what that backend serves. Tensors are wrapped around flashcheck's device buffers (from_blob with
// the case's strides, no copy of the inputs); the result is copied into O. SDPA's public op returns no LSE, so
// every backend declares lse = 0 and is judged on O. PyTorch's is_causal is the top-left alignment, so the only
// mask besides none is causal-tl. GQA is served by repeating K/V heads (exact: a copy). The backward pass
// (fc_subject_backward_v1; flash, cudnn, efficient) runs through autograd: dQ, dK, dV from the backend's own
// backward kernel.
// A problem the backend refuses with a checked error (c10::Error: "No available kernel", an alignment check)
// answers FC_SUBJECT_UNSUPPORTED with PyTorch's message; a CUDA error is FC_SUBJECT_ERROR (a failure).
// Known peer deviation, guarded here: the flash and cudnn backends accept rows that are not 16-byte aligned (a
// padded row stride, pad=N) and crash on them with a misaligned address, which loses the CUDA context. Those
// subjects refuse such strides as UNSUPPORTED, as PyTorch's own check should; FLASHCHECK_SDPA_UNGUARDED=1 lifts
// the guard, and the ctest known_peer_deviation.* replays the crash that way (subjects/sdpa/README.md).
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <torch/version.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "flashcheck/subject.h"

#ifndef FC_SDPA_BACKEND
#define FC_SDPA_BACKEND 0
#endif

namespace {

enum Backend { kFlash = 0, kCudnn = 1, kEfficient = 2, kMath = 3 };
constexpr Backend kBackend = static_cast<Backend>(FC_SDPA_BACKEND);

void select_backend() {
  at::Context& ctx = at::globalContext();
  ctx.setSDPUseFlash(kBackend == kFlash);
  ctx.setSDPUseMemEfficient(kBackend == kEfficient);
  ctx.setSDPUseMath(kBackend == kMath);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  ctx.setSDPUseCuDNN(kBackend == kCudnn);
#endif
}

at::ScalarType scalar_type(int32_t dtype) {
  switch (dtype) {
    case FC_SUBJECT_DTYPE_F16: return at::kHalf;
    case FC_SUBJECT_DTYPE_BF16: return at::kBFloat16;
    default: return at::kFloat;
  }
}

// [B, H, S, D] view of a flashcheck buffer with its element strides.
at::Tensor wrap(const void* data, const fc_subject_problem& p, int64_t heads, int64_t seqlen, const fc_subject_strides& s,
                const at::TensorOptions& options) {
  return at::from_blob(const_cast<void*>(data), {p.batch, heads, seqlen, p.head_dim}, {s.batch, s.head, s.row, 1},
                       options);
}

int fail(char* err, size_t err_len, int code, const std::string& message) {
  if (err != nullptr && err_len > 0) std::snprintf(err, err_len, "%s", message.c_str());
  return code;
}

// flash and cudnn: every stride and base pointer of q, k, v and o 16-byte aligned (8 fp16/bf16 elements), or
// "" when it is; otherwise the field that is not.
std::string misaligned_field(const fc_subject_problem& p, const fc_subject_buffers& b) {
  if (kBackend != kFlash && kBackend != kCudnn) return "";
  if (const char* unguarded = std::getenv("FLASHCHECK_SDPA_UNGUARDED"); unguarded != nullptr && *unguarded == '1') {
    return "";
  }
  const struct {
    const char* name;
    const void* data;
    const fc_subject_strides& stride;
  } tensors[] = {{"q", b.q, p.q_stride}, {"k", b.k, p.k_stride}, {"v", b.v, p.v_stride}, {"o", b.o, p.o_stride}};
  for (const auto& t : tensors) {
    if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0) return std::string(t.name) + " (base pointer)";
    if (t.stride.batch % 8 != 0 || t.stride.head % 8 != 0 || t.stride.row % 8 != 0) {
      return std::string(t.name) + "_stride (row " + std::to_string(t.stride.row) + ", head " +
             std::to_string(t.stride.head) + ", batch " + std::to_string(t.stride.batch) + " elements)";
    }
  }
  return "";
}

// Guards shared by the forward and the backward: nothing to do, a problem SDPA does not take, a stride this
// backend crashes on. Returns -1 to go on, else the code to return.
int refuse(const fc_subject_problem* p, const fc_subject_buffers* b, char* err, size_t err_len) {
  if (p->batch == 0 || p->heads_q == 0 || p->seqlen_q == 0) return FC_SUBJECT_OK;
  if (p->seqlen_k == 0) return fail(err, err_len, FC_SUBJECT_UNSUPPORTED, "seqlen_k: SDPA takes at least one key");
  if (const std::string field = misaligned_field(*p, *b); !field.empty()) {
    return fail(err, err_len, FC_SUBJECT_UNSUPPORTED,
                field + ": not 16-byte aligned; this backend crashes on it (known peer deviation, "
                        "subjects/sdpa/README.md)");
  }
  return -1;
}

// Runs `body(options)` on flashcheck's stream with the backend selected; PyTorch's checked errors become return
// codes: a CUDA error (C10_CUDA_CHECK's "CUDA error: ...") is a failure, any other the backend declining the problem.
template <class Body>
int on_stream(const fc_subject_problem* p, void* stream, char* err, size_t err_len, Body&& body) {
  try {
    int device = 0;
    cudaGetDevice(&device);
    const c10::cuda::CUDAStreamGuard guard(
        c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(stream), static_cast<c10::DeviceIndex>(device)));
    select_backend();
    body(at::TensorOptions().dtype(scalar_type(p->dtype)).device(at::kCUDA, device));
    return FC_SUBJECT_OK;
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    const bool cuda = what.find("CUDA error") != std::string::npos;
    return fail(err, err_len, cuda ? FC_SUBJECT_ERROR : FC_SUBJECT_UNSUPPORTED, what);
  }
}

// SDPA on Q, K, V (GQA served by repeating K/V heads: exact, and autograd sums the copies' gradients back).
at::Tensor attention(const fc_subject_problem& p, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t group = p.heads_q / p.heads_kv;
  const bool causal = p.mask == FC_SUBJECT_MASK_CAUSAL_TOP_LEFT;
  return at::scaled_dot_product_attention(q, group > 1 ? k.repeat_interleave(group, 1) : k,
                                          group > 1 ? v.repeat_interleave(group, 1) : v, /*attn_mask=*/{},
                                          /*dropout_p=*/0.0, causal, static_cast<double>(p.softmax_scale));
}

int forward(const fc_subject_problem* p, const fc_subject_buffers* b, void* stream, char* err, size_t err_len) {
  if (const int code = refuse(p, b, err, err_len); code >= 0) return code;
  return on_stream(p, stream, err, err_len, [&](const at::TensorOptions& options) {
    const at::Tensor q = wrap(b->q, *p, p->heads_q, p->seqlen_q, p->q_stride, options);
    const at::Tensor k = wrap(b->k, *p, p->heads_kv, p->seqlen_k, p->k_stride, options);
    const at::Tensor v = wrap(b->v, *p, p->heads_kv, p->seqlen_k, p->v_stride, options);
    wrap(b->o, *p, p->heads_q, p->seqlen_q, p->o_stride, options).copy_(attention(*p, q, k, v));
  });
}

// The backward through autograd, as training calls it: SDPA's forward again on leaf copies of Q, K, V (the saved
// O and LSE of the ABI's forward are not SDPA's to take: its public op returns no LSE), then the backend's
// backward on dO; the gradients are copied into dQ, dK, dV.
int backward(const fc_subject_problem* p, const fc_subject_sequence_args* sequences,
             const fc_subject_backward_strides* strides, const fc_subject_buffers* f, const fc_subject_backward_buffers* b,
             void* stream, char* err, size_t err_len) {
  if (sequences != nullptr) return fail(err, err_len, FC_SUBJECT_UNSUPPORTED, "sequences: SDPA takes dense batches");
  // GQA's K/V heads are repeated for SDPA, and autograd sums the copies' dK and dV in the dtype: a rounding per copy and
  // per add that the tensor-core class (one rounding of the fp32 sum) does not have; the GPU tier saw efficient's bf16
  // dK pass that class's bound by 1.45 on a group of 2. The adapter's rounding, not the backend's: not judged here.
  if (p->heads_q != p->heads_kv) {
    return fail(err, err_len, FC_SUBJECT_UNSUPPORTED,
                "heads_kv: GQA's backward goes through repeated K/V heads, whose gradients autograd sums in the dtype");
  }
  if (const int code = refuse(p, f, err, err_len); code >= 0) return code;
  return on_stream(p, stream, err, err_len, [&](const at::TensorOptions& options) {
    const at::Tensor q = wrap(f->q, *p, p->heads_q, p->seqlen_q, p->q_stride, options).detach().requires_grad_();
    const at::Tensor k = wrap(f->k, *p, p->heads_kv, p->seqlen_k, p->k_stride, options).detach().requires_grad_();
    const at::Tensor v = wrap(f->v, *p, p->heads_kv, p->seqlen_k, p->v_stride, options).detach().requires_grad_();
    const at::Tensor d_o = wrap(b->d_o, *p, p->heads_q, p->seqlen_q, strides->d_o, options);
    attention(*p, q, k, v).backward(d_o);
    wrap(b->dq, *p, p->heads_q, p->seqlen_q, strides->dq, options).copy_(q.grad());
    wrap(b->dk, *p, p->heads_kv, p->seqlen_k, strides->dk, options).copy_(k.grad());
    wrap(b->dv, *p, p->heads_kv, p->seqlen_k, strides->dv, options).copy_(v.grad());
  });
}

// Head dims: multiples of 8 up to 256 (flash, efficient), up to 128 (cudnn); any up to 256 (math).
std::vector<int32_t> multiples_of_8(int32_t max) {
  std::vector<int32_t> dims;
  for (int32_t d = 8; d <= max; d += 8) dims.push_back(d);
  return dims;
}
const std::vector<int32_t> kHeadDims = multiples_of_8(kBackend == kCudnn ? 128 : 256);

constexpr uint32_t kHalfTypes = FC_SUBJECT_BIT(FC_SUBJECT_DTYPE_F16) | FC_SUBJECT_BIT(FC_SUBJECT_DTYPE_BF16);
constexpr int32_t kTc = FC_SUBJECT_ARITH_TENSOR_CORE;
constexpr int32_t kUndeclared = FC_SUBJECT_ARITH_UNDECLARED;

fc_subject make_subject() {
  fc_subject s{};
  s.abi_version = FC_SUBJECT_ABI_VERSION;
  s.name = kBackend == kFlash ? "sdpa-flash" : kBackend == kCudnn ? "sdpa-cudnn" : kBackend == kEfficient ? "sdpa-efficient"
                                                                                                         : "sdpa-math";
  fc_subject_capabilities& c = s.capabilities;
  c.dtypes = (kBackend == kFlash || kBackend == kCudnn) ? kHalfTypes : kHalfTypes | FC_SUBJECT_BIT(FC_SUBJECT_DTYPE_F32);
  if (kBackend == kMath) {
    c.head_dim_min = 1;
    c.head_dim_max = 256;
  } else {
    c.head_dims = kHeadDims.data();
    c.head_dim_count = static_cast<int32_t>(kHeadDims.size());
  }
  c.masks = FC_SUBJECT_BIT(FC_SUBJECT_MASK_NONE) | FC_SUBJECT_BIT(FC_SUBJECT_MASK_CAUSAL_TOP_LEFT);
  c.layouts = FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_BHSD) | FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_BSHD) |
              FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_STRIDED);
  c.gqa = 1;
  c.lse = 0;
  c.softcap = 0;
  c.sink = 0;
  c.memory = FC_SUBJECT_MEMORY_DEVICE;
  // flash, cudnn and efficient run the FlashAttention class on fp16/bf16. Efficient's fp32 path and the math
  // backend (unfused matmuls whose output dtype, and so the rounding of the scores before the softmax, depends
  // on the version and on its upcasting) are declared as no class: the generic bound judges them.
  fc_subject_arithmetic& a = s.arithmetic;
  a.arithmetic[FC_SUBJECT_DTYPE_F32] = kUndeclared;
  a.arithmetic[FC_SUBJECT_DTYPE_F16] = kBackend == kMath ? kUndeclared : kTc;
  a.arithmetic[FC_SUBJECT_DTYPE_BF16] = kBackend == kMath ? kUndeclared : kTc;
  a.key_tile = 0;  // the tiling varies with head_dim and architecture
  s.forward = forward;
  return s;
}
const fc_subject kSubject = make_subject();

// The backward's classes: flash, cudnn and efficient run FlashAttention's backward on fp16/bf16 (P and dS rounded to
// the dtype before their products, fp32 accumulation). Their fp32 paths and the math backend (autograd through unfused
// matmuls whose rounding points depend on the version) are left undeclared, as their forwards are: the math library
// exports no backward. None is declared deterministic (dQ may be accumulated with atomics). The forward writes no
// LSE, so the harness hands the backward the exact one (subject.h); the backward recomputes its forward anyway.
fc_subject_backward make_backward() {
  fc_subject_backward s{};
  s.arithmetic[FC_SUBJECT_DTYPE_F32] = kUndeclared;
  s.arithmetic[FC_SUBJECT_DTYPE_F16] = kTc;
  s.arithmetic[FC_SUBJECT_DTYPE_BF16] = kTc;
  s.sink = 0;
  s.sequences = 0;
  s.deterministic = 0;
  s.backward = backward;
  return s;
}
const fc_subject_backward kBackward = make_backward();

}  // namespace

const fc_subject* fc_subject_v1(void) { return &kSubject; }
#if FC_SDPA_BACKEND != 3  // the math backend's library exports no backward (make_backward above)
const fc_subject_backward* fc_subject_backward_v1(void) { return &kBackward; }
#endif
