// wgmma shared-memory matrix descriptors (PTX ISA, "Matrix Descriptor Format"), host- and device-visible so that the
// CPU tier checks the arithmetic the kernels issue their chains with (kernel_model_test: TensorCoreDescriptor).
// A descriptor packs the operand's start address, its leading and stride byte offsets (each >> 4, 14 bits) and the
// swizzle mode: start address in bits 0-13, leading offset in 16-29, stride offset in 32-45, 128-byte swizzle
// (layout type 1) in bits 62-63.
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace flashcheck::tensor_core {

// The operand's addresses live in the low 18 bits of a shared-memory address (228 KB per SM); higher bits (on
// sm_90 the CTA's rank in its cluster, from bit 24) are not part of the descriptor.
inline constexpr uint32_t kDescriptorAddressMask = 0x3FFFF;

// Descriptor of a 128-byte-swizzled operand at shared address `addr`.
FLASHCHECK_HOST_DEVICE constexpr uint64_t sw128_descriptor(uint32_t addr, uint32_t leading_bytes,
                                                           uint32_t stride_bytes) {
  return (static_cast<uint64_t>(addr & kDescriptorAddressMask) >> 4) |
         (static_cast<uint64_t>(leading_bytes >> 4) << 16) | (static_cast<uint64_t>(stride_bytes >> 4) << 32) |
         (uint64_t{1} << 62);
}

// The descriptor of the operand `bytes` further on (a multiple of 16), from one built by sw128_descriptor: only
// the start address field moves. Equal to sw128_descriptor(addr + bytes, ...) while the operand's address stays
// below 2^18 (it is in shared memory), so the 14-bit field never carries into the leading offset: a wgmma chain
// builds one descriptor per operand and adds each k16 step's offset, one integer add instead of a mask, a shift
// and an or per step (docs/design/tensor-core-kernel.md, "Descriptors and the issue path").
FLASHCHECK_HOST_DEVICE constexpr uint64_t descriptor_plus(uint64_t desc, uint32_t bytes) {
  return (desc & 0xFFFFFFFF00000000ull) | (static_cast<uint32_t>(desc) + (bytes >> 4));
}

}  // namespace flashcheck::tensor_core
