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

// PRMT (__byte_perm): byte n of the result is byte s_n (nibble n of `s`, 0..7) of the eight bytes y:x, x low.
FLASHCHECK_HOST_DEVICE inline uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(x, y, s);
#else
  const uint64_t bytes = (static_cast<uint64_t>(y) << 32) | x;
  uint32_t out = 0;
  for (int n = 0; n < 4; ++n) out |= static_cast<uint32_t>((bytes >> (8 * ((s >> (4 * n)) & 7))) & 0xFF) << (8 * n);
  return out;
#endif
}

// A 4 x 4 block of bytes transposed: byte i of out[e] is byte e of w[i] (word i: one key's four columns; word e of
// the result: one column's four keys), in six byte permutes.
FLASHCHECK_HOST_DEVICE inline void transpose_bytes(const uint32_t (&w)[4], uint32_t (&out)[4]) {
  const uint32_t x0 = byte_perm(w[0], w[1], 0x5140), x1 = byte_perm(w[0], w[1], 0x7362);  // w0/w1 bytes interleaved
  const uint32_t y0 = byte_perm(w[2], w[3], 0x5140), y1 = byte_perm(w[2], w[3], 0x7362);
  out[0] = byte_perm(x0, y0, 0x5410);
  out[1] = byte_perm(x0, y0, 0x7632);
  out[2] = byte_perm(x1, y1, 0x5410);
  out[3] = byte_perm(x1, y1, 0x7632);
}

}  // namespace flashcheck::detail::fp8_layout
