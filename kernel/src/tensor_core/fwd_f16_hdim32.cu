// The f16 head-dim-32 family of the tensor-core forward kernel: one translation unit per (dtype, family)
// so the families compile in parallel. Tiles: Sm90Tile<32> (tile_config.h).
#include "kernel_ws.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace tc_kernel {
template Status launch_forward<__half, 32>(const KernelArgs& args, cudaStream_t stream);
}  // namespace tc_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
