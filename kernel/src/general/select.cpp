// general_select(): the general CUDA-core family serves every input can_implement() accepts; this picks
// its head_dim family and reports the tile sizes from tile_config.h (host code, no CUDA). The family holds the
// larger of Q's and K's head_dim and V's and O's head_dim_v: one padded width for all four tiles.
#include <algorithm>

#include "families.h"
#include "tile_config.h"

namespace flashcheck::detail {
namespace {

template <int HeadDimPadded>
KernelConfig general_config(const char* name) {
  using Cfg = GeneralConfigFor<HeadDimPadded>;
  KernelConfig config;
  config.path = ComputePath::kGeneralFp32;
  config.block_m = Cfg::kBlockM;
  config.block_n = Cfg::kBlockN;
  config.head_dim_padded = Cfg::kHeadDim;
  config.name = name;
  return config;
}

}  // namespace

bool general_select(const Params& params, KernelConfig* config) {
  switch (general_tile_choice(std::max(params.head_dim, value_head_dim(params))).head_dim_padded) {
    case 32: *config = general_config<32>("general_hd32"); break;
    case 64: *config = general_config<64>("general_hd64"); break;
    case 128: *config = general_config<128>("general_hd128"); break;
    default: *config = general_config<256>("general_hd256"); break;
  }
  return true;
}

}  // namespace flashcheck::detail
