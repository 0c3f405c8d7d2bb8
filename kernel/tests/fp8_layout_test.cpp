// Part of kernel_model_test (cpu): the fp8 kernel's layouts (fp8/layout.h). P goes from S's accumulator registers
// straight into the A fragment of P V, and the V transpose stores each k32 block's keys in the order that puts V of
// key k in the k-slot where the A fragment holds P of key k. Here, from the PTX layouts of the accumulator and of the
// 8-bit A fragment (layout.h), every byte of every thread's A registers is checked to meet V of its own key; the GPU
// tier checks the kernel's results (and the mutant fp8-vt-keys-unpermuted, the transpose in natural key order).
#include <gtest/gtest.h>

#include <set>

#include "fp8/layout.h"

namespace flashcheck::detail::fp8_layout {
namespace {

TEST(Fp8Layout, EveryByteOfPMeetsVOfItsOwnKey) {
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, q = lane % 4;
    for (int reg = 0; reg < 4; ++reg) {
      for (int byte = 0; byte < 4; ++byte) {
        // Where the byte comes from: S's accumulator, n8 block `block` of the k32 block, element `element`.
        const PSource src = p_source(reg, byte);
        ASSERT_GE(src.block, 0);
        ASSERT_LT(src.block, 4);
        const int p_row = g + 8 * (src.element / 2);
        const int p_key = 8 * src.block + 2 * q + src.element % 2;
        // Where the A fragment puts it: its row and k-slot.
        const int a_row = g + 8 * (reg % 2);
        const int a_slot = 16 * (reg / 2) + 4 * q + byte;
        EXPECT_EQ(p_row, a_row) << "lane " << lane << " register " << reg << " byte " << byte;
        EXPECT_EQ(key_of_slot(a_slot), p_key) << "lane " << lane << " register " << reg << " byte " << byte;
      }
    }
  }
}

TEST(Fp8Layout, KeyOfSlotIsAPermutationOfTheBlock) {
  std::set<int> keys;
  for (int slot = 0; slot < kStepK; ++slot) {
    const int key = key_of_slot(slot);
    EXPECT_GE(key, 0);
    EXPECT_LT(key, kStepK);
    keys.insert(key);
  }
  EXPECT_EQ(keys.size(), static_cast<size_t>(kStepK));
}

// The transpose and the copies store 4-byte words at swizzled(row, 4 w): each word stays whole, and an 8-row atom's
// 1024 bytes are each written once.
TEST(Fp8Layout, SwizzleIsABijectionOfTheAtomThatKeepsWordsWhole) {
  std::set<uint32_t> bytes;
  for (int row = 0; row < 8; ++row) {
    for (int byte = 0; byte < kRowBytes; ++byte) {
      const uint32_t at = swizzled(row, byte);
      EXPECT_LT(at, 8u * kRowBytes);
      bytes.insert(at);
      if (byte % 4 != 0) {
        EXPECT_EQ(at, swizzled(row, byte - byte % 4) + static_cast<uint32_t>(byte % 4));
      }
    }
  }
  EXPECT_EQ(bytes.size(), 8u * kRowBytes);
  EXPECT_EQ(swizzled(9, 0), swizzled(1, 0) + 8u * kRowBytes);  // the next atom repeats the pattern
}

TEST(Fp8Layout, TransposeBytesTransposesEveryBlock) {
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (int trial = 0; trial < 1000; ++trial) {
    uint32_t w[4], out[4];
    for (uint32_t& x : w) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      x = static_cast<uint32_t>(state >> 32);
    }
    transpose_bytes(w, out);
    for (int i = 0; i < 4; ++i) {
      for (int e = 0; e < 4; ++e) {
        ASSERT_EQ((out[e] >> (8 * i)) & 0xFF, (w[i] >> (8 * e)) & 0xFF) << "word " << i << " byte " << e;
      }
    }
  }
}

}  // namespace
}  // namespace flashcheck::detail::fp8_layout
