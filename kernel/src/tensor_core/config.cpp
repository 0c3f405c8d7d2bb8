// tensor_core_select(): which fp16/bf16 inputs the tensor-core family serves, and with which tiles.
// Host code without CUDA, so the host model and the CPU tier see the tiles the GPU would run. Anything
// refused here (other dtypes, misaligned layouts, softmax_scale == 0) falls through to the next family.
#include <cstdint>

#include "../families.h"
#include "tile_config.h"

namespace flashcheck::detail {
namespace {

using tensor_core::kChunkBytes;
using tensor_core::kChunkElems;

// 16-byte cp.async / vector stores need every row start 16-byte aligned: an aligned base and strides in
// whole chunks. A stride only matters when its axis has more than one index.
bool chunk_aligned(const void* ptr, const Strides& stride, int64_t batch, int64_t heads, int64_t seqlen) {
  const auto whole = [](int64_t extent, int64_t s) { return extent <= 1 || s % kChunkElems == 0; };
  return reinterpret_cast<uintptr_t>(ptr) % kChunkBytes == 0 && whole(batch, stride.batch) &&
         whole(heads, stride.head) && whole(seqlen, stride.row);
}

const char* family_name(DType dtype, int family) {
  const bool bf16 = dtype == DType::kBF16;
  switch (family) {
    case 32: return bf16 ? "tensor_core_bf16_hdim32" : "tensor_core_f16_hdim32";
    case 64: return bf16 ? "tensor_core_bf16_hdim64" : "tensor_core_f16_hdim64";
    case 96: return bf16 ? "tensor_core_bf16_hdim96" : "tensor_core_f16_hdim96";
    case 128: return bf16 ? "tensor_core_bf16_hdim128" : "tensor_core_f16_hdim128";
    case 192: return bf16 ? "tensor_core_bf16_hdim192" : "tensor_core_f16_hdim192";
    default: return bf16 ? "tensor_core_bf16_hdim256" : "tensor_core_f16_hdim256";
  }
}

}  // namespace

bool tensor_core_select(const Params& p, KernelConfig* config) {
  if (p.dtype != DType::kF16 && p.dtype != DType::kBF16) return false;
  const int family = tensor_core::family_head_dim(p.head_dim);
  if (p.head_dim < 1 || family == 0) return false;
  // scale == 0 would make a masked score's exponent -inf * 0 = NaN; the general family serves it.
  if (p.softmax_scale == 0.0f) return false;
  if (!chunk_aligned(p.q, p.q_stride, p.batch, p.heads_q, p.seqlen_q) ||
      !chunk_aligned(p.k, p.k_stride, p.batch, p.heads_kv, p.seqlen_k) ||
      !chunk_aligned(p.v, p.v_stride, p.batch, p.heads_kv, p.seqlen_k) ||
      !chunk_aligned(p.o, p.o_stride, p.batch, p.heads_q, p.seqlen_q)) {
    return false;
  }
  const tensor_core::TileShape shape = tensor_core::tile_shape_sm90(family);
  config->path = ComputePath::kTensorCore;
  config->block_m = shape.block_m;
  config->block_n = shape.block_n;
  config->head_dim_padded = family;
  config->name = family_name(p.dtype, family);
  return true;
}

}  // namespace flashcheck::detail
