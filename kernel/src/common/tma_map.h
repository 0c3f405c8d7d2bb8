// TMA tensor maps of the operands the sm_90a kernels load and store with bulk tensor copies (the warp-specialized
// tensor-core kernel, tensor_core/kernel_ws.cuh; the fp8 kernel, fp8/kernel.cuh): a (head_dim, rows, heads, batch)
// map with the tensor's own strides, boxes of one 128-byte swizzle row of columns. Host code of the CUDA libraries.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "common/args.h"
#include "families.h"
#include "tensor_core/tile_config.h"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace tma {

using tensor_core::kSwizzleRowBytes;

// cuTensorMapEncodeTiled through the runtime's driver entry point (no link against libcuda); null if absent.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      f = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// Largest coordinate the kernel hands TMA (int32), with room for a tile past the last row.
inline constexpr int64_t kTmaMaxCoord = (int64_t{1} << 31) - 1024;

// A (head_dim, rows, heads, batch) map of one operand, box (64, box_rows), 128-byte swizzle, zeros outside.
// False where TMA cannot address it: base, row length or a stride not 16-byte aligned, a stride past 2^40
// bytes, a non-positive stride of a dimension with more than one index.
// T: __half, __nv_bfloat16, or uint8_t for e4m3 (TMA moves its bytes as they are).
template <typename T>
bool encode_operand(CUtensorMap* map, const TensorArg& t, int64_t head_dim, int64_t rows, int64_t heads, int64_t batch,
                    int box_rows) {
  const auto encode = tensor_map_encoder();
  if (encode == nullptr || t.ptr == nullptr || reinterpret_cast<uintptr_t>(t.ptr) % 16 != 0) return false;
  // Rows of whole 16-byte chunks only: with head_dim = 47 (pad 1) the H100's TMA store wrote the padding
  // element after each row, and loads read it (Gpu_Properties.MemorySafety and OracleAgreement found both).
  if (head_dim * static_cast<int64_t>(sizeof(T)) % 16 != 0) return false;
  if (rows < 1 || heads < 1 || batch < 1 || rows > kTmaMaxCoord || heads > kTmaMaxCoord || batch > kTmaMaxCoord)
    return false;
  const int64_t dims[4] = {head_dim, rows, heads, batch};
  const int64_t elem_strides[3] = {t.stride.row, t.stride.head, t.stride.batch};
  cuuint64_t global_dims[4];
  cuuint64_t global_strides[3];
  int64_t packed = head_dim * static_cast<int64_t>(sizeof(T));  // bytes a packed layout would step
  for (int i = 0; i < 4; ++i) global_dims[i] = static_cast<cuuint64_t>(dims[i]);
  for (int i = 0; i < 3; ++i) {
    packed = (packed + 15) / 16 * 16;
    int64_t bytes = elem_strides[i] * static_cast<int64_t>(sizeof(T));
    if (dims[i + 1] == 1) bytes = packed;  // never stepped: any valid stride
    if (bytes <= 0 || bytes % 16 != 0 || bytes >= (int64_t{1} << 40)) return false;
    global_strides[i] = static_cast<cuuint64_t>(bytes);
    packed = bytes * dims[i + 1];
  }
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(kSwizzleRowBytes / sizeof(T)), static_cast<cuuint32_t>(box_rows),
                             1, 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, uint8_t>);
  const CUtensorMapDataType dtype = std::is_same_v<T, __half>         ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                    : std::is_same_v<T, __nv_bfloat16> ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                                       : CU_TENSOR_MAP_DATA_TYPE_UINT8;
  return encode(map, dtype, 4, const_cast<void*>(t.ptr), global_dims, global_strides, box, element_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace tma
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
