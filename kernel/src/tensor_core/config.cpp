// tensor_core_select(): which fp16/bf16 inputs the tensor-core family serves, and with which tiles.
// Host code without CUDA, so the host model and the CPU tier see the tiles the GPU would run. Anything
// refused here (other dtypes, misaligned layouts, softmax_scale == 0) falls through to the next family.
#include <array>
#include <cstdint>
#include <string>

#include "families.h"
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

// "tensor_core_<dtype>_hdim<family>" for every family of kFamilies, built once (the names outlive every call).
const char* family_name(DType dtype, int family) {
  using Names = std::array<std::string, std::size(tensor_core::kFamilies)>;
  static const std::array<Names, 2> names = [] {
    std::array<Names, 2> all;
    for (size_t i = 0; i < std::size(tensor_core::kFamilies); ++i) {
      all[0][i] = "tensor_core_f16_hdim" + std::to_string(tensor_core::kFamilies[i]);
      all[1][i] = "tensor_core_bf16_hdim" + std::to_string(tensor_core::kFamilies[i]);
    }
    return all;
  }();
  size_t i = 0;
  while (tensor_core::kFamilies[i] != family) ++i;  // family comes from family_head_dim(): it is listed
  return names[dtype == DType::kBF16 ? 1 : 0][i].c_str();
}

}  // namespace

bool tensor_core_select(const Params& p, KernelConfig* config) {
  if (p.dtype != DType::kF16 && p.dtype != DType::kBF16) return false;
  const int family = tensor_core::family_head_dim(p.head_dim);
  if (p.head_dim < 1 || family == 0) return false;
  // scale == 0 would make a masked score's exponent -inf * 0 = NaN; the general family serves it.
  if (p.softmax_scale == 0.0f) return false;
  // Packed tensors (cu_seqlens) are one batch of total rows.
  const bool packed_q = p.cu_seqlens_q != nullptr || p.total_q != 0;
  const bool packed_k = p.cu_seqlens_k != nullptr || p.total_k != 0;
  const int64_t q_batch = packed_q ? 1 : p.batch, q_rows = packed_q ? p.total_q : p.seqlen_q;
  const int64_t k_batch = packed_k ? 1 : p.batch, k_rows = packed_k ? p.total_k : p.seqlen_k;
  if (!chunk_aligned(p.q, p.q_stride, q_batch, p.heads_q, q_rows) ||
      !chunk_aligned(p.k, p.k_stride, k_batch, p.heads_kv, k_rows) ||
      !chunk_aligned(p.v, p.v_stride, k_batch, p.heads_kv, k_rows) ||
      !chunk_aligned(p.o, p.o_stride, q_batch, p.heads_q, q_rows)) {
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
