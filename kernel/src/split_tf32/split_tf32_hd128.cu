// Split-TF32 kernel instantiation for the head_dim family 128 (head_dim <= 128, zero-padded in smem).
// One translation unit per family so the build compiles the families in parallel.
#include "split_tf32/kernel_wgmma.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace split_tf32 {

Status launch_split_tf32_hd128(const Params& params, cudaStream_t stream, const Instrumentation* inst) {
#if defined(FLASHCHECK_TC_WGMMA)  // sm_90a: tf32 warpgroup MMAs (tiles.h)
  constexpr SplitTf32TileChoice kChoice = split_tf32_tile_choice(128);
  static_assert(kChoice.wgmma, "split_tf32: sm_90a builds run head_dim family 128 on kernel_wgmma.cuh");
  return launch_split_tf32_wgmma<SplitTf32WgmmaConfig<kChoice.head_dim_padded, kChoice.block_n>>(params, stream, inst);
#else
  return launch_split_tf32_config<SplitTf32ConfigFor<128>>(params, stream, inst);
#endif
}

}  // namespace split_tf32
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
