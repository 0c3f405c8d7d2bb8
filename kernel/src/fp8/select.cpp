// fp8_select(): the tiles of the fp8 (e4m3) forward path, docs/design/fp8-forward.md. Host code, so the host model
// and the CPU tier see the tiles the fp8 kernel runs (kernel.cuh): 128 query rows (two warpgroups of 64) against K/V
// tiles of 128 keys (four k32 wgmma steps of P V, each tile's result promoted into fp32), Q's and K's head_dim and
// V's head_dim_v padded to one family of 128 or 256 columns (128-byte swizzle rows of e4m3). The path serves every
// f8e4m3 problem can_implement accepts (dense or packed sequences, seqused_k; no paged K/V, split-KV or dropout); its
// CUDA kernel is in sm_90a builds (fp8/launch.cu).
#include <algorithm>

#include "families.h"

namespace flashcheck::detail {

bool fp8_select(const Params& params, KernelConfig* config) {
  if (params.dtype != DType::kF8E4M3) return false;
  const int64_t dim = std::max(params.head_dim, value_head_dim(params));
  KernelConfig c;
  c.path = ComputePath::kTensorCoreFp8;
  c.block_m = kFp8BlockM;
  c.block_n = kFp8BlockN;
  if (dim <= 128) {
    c.head_dim_padded = 128;
    c.name = "tensor_core_fp8_hdim128";
  } else {
    c.head_dim_padded = 256;
    c.name = "tensor_core_fp8_hdim256";
  }
  *config = c;
  return true;
}

}  // namespace flashcheck::detail
