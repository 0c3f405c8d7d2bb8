// The register and shared-memory layouts the fp8 kernel (kernel.cuh) relies on, host- and device-visible so that the
// CPU tier checks them (kernel_model_test: Fp8Layout): the 128-byte swizzle, where a byte of P comes from in S's
// accumulator, and the order in which the V transpose stores a k32 block's keys so that the two meet.
//
// The PTX facts used (ISA, "Register Fragments", wgmma m64nNk16/k32; the same per warp as mma.sync m16n8k16/k32):
//   accumulator (fp32): thread (g = lane / 4, q = lane % 4) of a warp holds, per n8 block j, row g: columns
//                       8j + 2q + {0, 1} in elements 0, 1; row g + 8: the same columns in elements 2, 3.
//   A (8-bit, k32):     register r, byte b (low first) holds row g + 8 (r % 2), k-slot 16 (r / 2) + 4q + b.
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace flashcheck::detail::fp8_layout {

inline constexpr int kRowBytes = 128;  // one 128-byte swizzle row: 128 e4m3 elements
inline constexpr int kStepK = 32;      // an e4m3 wgmma step: k32

// Byte `byte` (0..127) of row `row` of a block of 128-byte rows in the 128-byte swizzle TMA writes and wgmma reads:
// 16-byte chunk c of row r sits at chunk c ^ (r % 8) (the block 1024-byte aligned).
FLASHCHECK_HOST_DEVICE constexpr uint32_t swizzled(int row, int byte) {
  return static_cast<uint32_t>(row * kRowBytes + (((byte / 16) ^ (row % 8)) * 16) + byte % 16);
}

// Where byte `byte` of A register `reg` of a k32 step comes from in S's accumulator: n8 block `block` (of the step's
// four) and element `element` (0..3) of the same thread.
struct PSource {
  int block;
  int element;
};
FLASHCHECK_HOST_DEVICE constexpr PSource p_source(int reg, int byte) {
  return {(reg / 2) * 2 + byte / 2, (reg % 2) * 2 + byte % 2};
}

// The key (0..31, within a k32 block) that Vt stores at k-slot `slot`: the key P's accumulator holds where the A
// fragment expects that slot. Thread q holds keys 2q, 2q+1 (n8 block 0), 2q+8, 2q+9 (block 1), 2q+16, 2q+17,
// 2q+24, 2q+25 (blocks 2, 3); its A registers hold slots 4q..4q+3 and 16+4q..16+4q+3, low byte first.
FLASHCHECK_HOST_DEVICE constexpr int key_of_slot(int slot) {
  const int half = slot / 16, q = (slot % 16) / 4, i = slot % 4;
  return 16 * half + 2 * q + (i & 1) + 8 * (i >> 1);
}

}  // namespace flashcheck::detail::fp8_layout
