// tensor_core_select(): which fp16/bf16 inputs the tensor-core family serves, and with which tiles.
// Host code without CUDA, so the host model and the CPU tier see the tiles the GPU would run. Anything
// refused here (other dtypes, head_dim_v != head_dim outside the value pairs, misaligned layouts,
// softmax_scale == 0) falls through to the next family.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/visibility.h"
#include "families.h"
#include "schedule.h"
#include "tile_config.h"

namespace flashcheck::detail {
namespace {

using tensor_core::kChunkBytes;

// "tensor_core_<dtype>_hdim<family>" for every family of kFamilies and "..._hdim<family>_dv<family_v>" for every
// pair of kValuePairs, built once (the names outlive every call). (family, family_v) is listed: family_v == family
// for a family of equal dims, a pair of kValuePairs otherwise (tensor_core_select).
const char* config_name(DType dtype, int family, int family_v) {
  struct Entry {
    int family, family_v;
    std::string name[2];  // f16, bf16
  };
  static const std::vector<Entry> names = [] {
    std::vector<Entry> all;
    const auto add = [&](int f, int fv, const std::string& dims) {
      all.push_back({f, fv, {"tensor_core_f16_hdim" + dims, "tensor_core_bf16_hdim" + dims}});
    };
    for (int f : tensor_core::kFamilies) add(f, f, std::to_string(f));
    for (tensor_core::ValuePair pair : tensor_core::kValuePairs) {
      add(pair.head_dim, pair.head_dim_v, std::to_string(pair.head_dim) + "_dv" + std::to_string(pair.head_dim_v));
    }
    return all;
  }();
  size_t i = 0;
  while (names[i].family != family || names[i].family_v != family_v) ++i;
  return names[i].name[dtype == DType::kBF16 ? 1 : 0].c_str();
}

inline constexpr int64_t kMaxTallRuleSeqlen = std::numeric_limits<int32_t>::max();

// The family's tall shape (tile_config.h) where this launch's Q tiles read enough K/V tiles for it to pay: always
// without a mask that bounds the rows' keys, else when the middle Q tile of the first shape reads at least
// kTallMinTiles K/V tiles.
tensor_core::TileShape tile_shape_for(const Params& p, int family) {
  const tensor_core::TileShape shape = tensor_core::tile_shape_sm90(family);
  const tensor_core::TileShape tall = tensor_core::tall_tile_shape_sm90(family);
  if (tall.block_m == 0) return shape;
  const Visibility vis = make_visibility(p);
  if (!vis.bounded_begin && !vis.bounded_end) return tall;
  // Sequences of 2^31 rows or more (valid params; the warp-specialized kernel addresses rows in 32 bits) keep the
  // first shape, so that the tile arithmetic below stays inside int64.
  if (p.seqlen_q > kMaxTallRuleSeqlen || p.seqlen_k > kMaxTallRuleSeqlen) return shape;
  const int64_t reads =
      tensor_core::middle_q_tile_reads(vis, ceil_div(p.seqlen_q, int64_t{shape.block_m}), shape.block_m, shape.block_n);
  return reads >= tensor_core::kTallMinTiles ? tall : shape;
}

}  // namespace

bool tensor_core_select(const Params& p, KernelConfig* config) {
  if (p.dtype != DType::kF16 && p.dtype != DType::kBF16) return false;
  const int family = tensor_core::family_head_dim(p.head_dim);
  if (p.head_dim < 1 || family == 0) return false;
  // Unequal head dims: the value pairs' kernels (sm_90a), where the two dims' families form one of kValuePairs;
  // the general family serves the others (unequal dims within one family among them).
  const bool unequal = value_head_dim(p) != p.head_dim;
  const int family_v = unequal ? tensor_core::family_head_dim(value_head_dim(p)) : family;
#if defined(FLASHCHECK_TC_WGMMA)
  if (unequal && !tensor_core::is_value_pair(family, family_v)) return false;
#else
  if (unequal) return false;
#endif
  // scale == 0 would make a masked score's exponent -inf * 0 = NaN; the general family serves it.
  if (p.softmax_scale == 0.0f) return false;
  // 16-byte cp.async / vector stores need every row start 16-byte aligned.
  if (!rows_aligned(p, kChunkBytes)) return false;
  const tensor_core::TileShape shape =
      unequal ? tensor_core::value_pair_shape_sm90(family) : tile_shape_for(p, family);
  config->path = ComputePath::kTensorCore;
  config->block_m = shape.block_m;
  config->block_n = shape.block_n;
  config->head_dim_padded = family;
  config->name = config_name(p.dtype, family, family_v);
  return true;
}

}  // namespace flashcheck::detail
