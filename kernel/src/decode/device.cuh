// The device vocabulary of the decode kernel's parts (kernel.cuh, loads.cuh, hidden_v.cuh): the tensor-core
// family's PTX wrappers it uses, and the warp's constants.
#pragma once

#include <cstdint>

#include "decode/tiles.h"
#include "families.h"
#include "tensor_core/ptx.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace decode_kernel {

using namespace ::flashcheck::decode;
using tc_kernel::cp_async_16;
using tc_kernel::cp_async_commit;
using tc_kernel::cp_async_wait;
using tc_kernel::DtypeOps;
using tc_kernel::ex2_approx;
using tc_kernel::ld_shared_v4;
using tc_kernel::ldmatrix_x4;
using tc_kernel::ldmatrix_x4_trans;
using tc_kernel::smem_address;
using tc_kernel::st_shared_v4;

inline constexpr bool kInstrument = FLASHCHECK_INSTRUMENT;
inline constexpr uint32_t kFullWarp = 0xFFFFFFFFu;
inline constexpr int kLanes = 32;

}  // namespace decode_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
