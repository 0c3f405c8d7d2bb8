// decode_select(): which problems the decode family serves (decode/kernel.cuh): fp16/bf16 with every query row of a
// K/V head's query heads in one 16-row tile (heads_q / heads_kv <= 16 and seqlen_q <= 16 / that group), head_dim a
// whole number of 16-byte chunks up to 256 and V and O of as many columns (head_dim_v 0 or head_dim), every row start
// 16-byte aligned. Dense, varlen and paged alike; anything else falls through to the next family.
#include <array>
#include <cstdint>
#include <string>

#include "decode/tiles.h"
#include "families.h"

namespace flashcheck::detail {
namespace {

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
  // V's and O's tiles have Q's and K's head dims here; other head_dim_v the general family serves.
  if (value_head_dim(p) != p.head_dim) return false;
  const int family = decode::family_head_dim(p.head_dim);
  const int64_t group = p.heads_q / p.heads_kv;
  if (family == 0 || group < 1 || group > decode::kRows) return false;
  const int64_t rows_per_head = decode::kRows / group;
  if (p.seqlen_q > rows_per_head) return false;
  if (!rows_aligned(p, decode::kChunkBytes)) return false;  // 16-byte cp.async and stores
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
