// decode_select(): which problems the decode family serves (decode/kernel.cuh): fp16/bf16 with every query row of a
// K/V head's query heads in one 16-row tile (heads_q / heads_kv <= 16 and seqlen_q <= 16 / that group), head_dim a
// whole number of 16-byte chunks up to 256, every row start 16-byte aligned. Dense, varlen and paged alike; anything
// else falls through to the next family.
#include <array>
#include <cstdint>
#include <string>

#include "decode/tiles.h"
#include "families.h"

namespace flashcheck::detail {
namespace {

// 16-byte cp.async needs every row start 16-byte aligned: an aligned base and strides in whole chunks (a stride
// matters only where its axis has more than one index; packed tensors have no batch axis).
bool chunk_aligned(const void* ptr, const Strides& stride, int64_t outer, int64_t heads, int64_t rows) {
  const auto whole = [](int64_t extent, int64_t s) { return extent <= 1 || s % decode::kChunkElems == 0; };
  return reinterpret_cast<uintptr_t>(ptr) % decode::kChunkBytes == 0 && whole(outer, stride.batch) &&
         whole(heads, stride.head) && whole(rows, stride.row);
}

const char* family_name(DType dtype, int family) {
  static const std::array<std::array<std::string, 3>, 2> names = [] {
    std::array<std::array<std::string, 3>, 2> all;
    for (size_t i = 0; i < 3; ++i) {
      all[0][i] = "decode_f16_hdim" + std::to_string(decode::kFamilies[i]);
      all[1][i] = "decode_bf16_hdim" + std::to_string(decode::kFamilies[i]);
    }
    return all;
  }();
  size_t i = 0;
  while (decode::kFamilies[i] != family) ++i;
  return names[dtype == DType::kBF16 ? 1 : 0][i].c_str();
}

}  // namespace

bool decode_select(const Params& p, KernelConfig* config) {
  if (p.dtype != DType::kF16 && p.dtype != DType::kBF16) return false;
  if (p.head_dim < 1 || p.head_dim % decode::kChunkElems != 0 || p.heads_kv < 1) return false;
  const int family = decode::family_head_dim(p.head_dim);
  const int64_t group = p.heads_q / p.heads_kv;
  if (family == 0 || group < 1 || group > decode::kRows) return false;
  const int64_t rows_per_head = decode::kRows / group;
  if (p.seqlen_q > rows_per_head) return false;
  const int64_t q_outer = p.cu_seqlens_q != nullptr ? 1 : p.batch;
  const int64_t q_rows = p.cu_seqlens_q != nullptr ? p.total_q : p.seqlen_q;
  const int64_t kv_outer = p.page_table != nullptr ? p.num_pages : p.cu_seqlens_k != nullptr ? 1 : p.batch;
  const int64_t kv_rows = p.page_table != nullptr ? p.page_size : p.cu_seqlens_k != nullptr ? p.total_k : p.seqlen_k;
  if (!chunk_aligned(p.q, p.q_stride, q_outer, p.heads_q, q_rows) ||
      !chunk_aligned(p.o, p.o_stride, q_outer, p.heads_q, q_rows) ||
      !chunk_aligned(p.k, p.k_stride, kv_outer, p.heads_kv, kv_rows) ||
      !chunk_aligned(p.v, p.v_stride, kv_outer, p.heads_kv, kv_rows)) {
    return false;
  }
  config->path = ComputePath::kTensorCore;
  config->block_m = static_cast<int32_t>(rows_per_head);
  config->heads_per_tile = static_cast<int32_t>(group);
  config->head_dim_padded = family;
  config->block_n = family == 64 ? decode::DecodeTile<64>::kBlockN
                    : family == 128 ? decode::DecodeTile<128>::kBlockN
                                    : decode::DecodeTile<256>::kBlockN;
  config->name = family_name(p.dtype, family);
  return true;
}

}  // namespace flashcheck::detail
