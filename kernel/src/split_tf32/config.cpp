// split_tf32_select(): which fp32 inputs the split-TF32 family serves, and with which tiles. Host code
// without CUDA, so the host model and the CPU tier see the tiles the GPU would run. The kernel moves Q, K, V
// and O in 16-byte chunks, so it needs 16-byte aligned bases and strides in whole chunks, and V and O of head_dim
// columns (head_dim_v 0 or head_dim); anything else falls through to the general family.
#include <cstdint>

#include "../families.h"
#include "tiles.h"

namespace flashcheck::detail {
namespace {

inline constexpr int64_t kChunkBytes = kFloat4Lanes * sizeof(float);

template <int HeadDimPadded>
KernelConfig split_tf32_config(const char* name, const char* wgmma_name = nullptr) {
  constexpr split_tf32_tiles::SplitTf32TileChoice choice = split_tf32_tiles::split_tf32_tile_choice(HeadDimPadded);
  KernelConfig config;
  config.path = ComputePath::kSplitTf32;
  config.block_m = choice.block_m;
  config.block_n = choice.block_n;
  config.head_dim_padded = choice.head_dim_padded;
  config.name = choice.wgmma && wgmma_name != nullptr ? wgmma_name : name;
  return config;
}

}  // namespace

bool split_tf32_select(const Params& p, KernelConfig* config) {
  if (p.dtype != DType::kF32 || p.head_dim < 1 || p.head_dim > 256) return false;
  // V's and O's tiles have Q's and K's head dims here; other head_dim_v the general family serves.
  if (value_head_dim(p) != p.head_dim) return false;
  if (!rows_aligned(p, kChunkBytes)) return false;
  switch (split_tf32_tiles::split_tf32_tile_choice(p.head_dim).head_dim_padded) {
    case 32: *config = split_tf32_config<32>("split_tf32_hd32"); break;
    case 64: *config = split_tf32_config<64>("split_tf32_hd64", "split_tf32_wgmma_hd64"); break;
    case 128: *config = split_tf32_config<128>("split_tf32_hd128", "split_tf32_wgmma_hd128"); break;
    default: *config = split_tf32_config<256>("split_tf32_hd256"); break;
  }
  return true;
}

}  // namespace flashcheck::detail
