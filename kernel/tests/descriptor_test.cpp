// Part of kernel_model_test (cpu): the wgmma descriptor arithmetic of the tensor-core kernels (descriptor.h). A
// chain builds one descriptor per operand and derives each k16 step's with descriptor_plus; the GPU tier checks the
// results, this checks that every derived descriptor is the one sw128_descriptor builds for that step's address,
// for every 16-byte-aligned shared address and every offset the chains use.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "tensor_core/descriptor.h"

namespace flashcheck::tensor_core {
namespace {

constexpr uint32_t kSwizzleRow = 128;   // bytes of one row of a 64-element column block
constexpr uint32_t kAtom = 8 * kSwizzleRow;
constexpr uint32_t kStepBytes = 32;     // 16 fp16/bf16 elements along a row
constexpr uint32_t kVStepBytes = 16 * kSwizzleRow;  // 16 keys of an MN-major V tile

// The byte offsets of the k16 steps of S = Q K^T (Q and K tiles: K-major, 64-column blocks of `rows` rows) and of
// O += P V (V tile, MN-major), for the sm_90a tile shapes (block_m 128 and 192, block_n 64 and 128, d 64-256).
std::set<uint32_t> chain_offsets() {
  std::set<uint32_t> offsets;
  for (uint32_t head_dim : {64u, 128u, 256u}) {
    for (uint32_t rows : {64u, 128u, 192u}) {
      for (uint32_t kk = 0; kk < head_dim / 16; ++kk) offsets.insert((kk / 4) * (rows * kSwizzleRow) + (kk % 4) * kStepBytes);
    }
  }
  for (uint32_t block_n : {64u, 128u}) {
    for (uint32_t kk = 0; kk < block_n / 16; ++kk) offsets.insert(kk * kVStepBytes);
  }
  return offsets;
}

TEST(TensorCoreDescriptor, FieldsFollowThePtxLayout) {
  const uint64_t d = sw128_descriptor(0x12340, 16, kAtom);
  EXPECT_EQ(d & 0x3FFF, 0x1234u);                // start address >> 4
  EXPECT_EQ((d >> 16) & 0x3FFF, 1u);             // leading byte offset 16 >> 4
  EXPECT_EQ((d >> 32) & 0x3FFF, kAtom >> 4);     // stride byte offset 1024 >> 4
  EXPECT_EQ(d >> 62, 1u);                        // 128-byte swizzle
  EXPECT_EQ((d >> 14) & 3, 0u);                  // reserved bits stay clear
  // Bits above the shared window's 18 (the CTA's rank in its cluster on sm_90) are not part of the address.
  EXPECT_EQ(sw128_descriptor(0x12340 | (5u << 24), 16, kAtom), d);
}

TEST(TensorCoreDescriptor, PlusOffsetEqualsTheDescriptorOfTheOffsetAddress) {
  const std::set<uint32_t> offsets = chain_offsets();
  ASSERT_GT(offsets.size(), 20u);
  int64_t checked = 0;
  for (uint32_t rank : {0u, 3u}) {
    for (uint32_t low = 0; low < kDescriptorAddressMask + 1; low += 16) {
      const uint32_t base = low | (rank << 24);
      for (uint32_t leading : {16u, 128u * kSwizzleRow}) {
        const uint64_t first = sw128_descriptor(base, leading, kAtom);
        for (uint32_t off : offsets) {
          if (low + off > kDescriptorAddressMask) continue;  // past shared memory: no operand lies there
          ASSERT_EQ(descriptor_plus(first, off), sw128_descriptor(base + off, leading, kAtom))
              << "address " << base << " + " << off << ", leading offset " << leading;
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 1000000);
}

// The precondition is real: where the address would pass 2^18 the start field carries into the reserved bits,
// while the descriptor of the wrapped address starts over at 0.
TEST(TensorCoreDescriptor, PlusCarriesPastTheSharedWindow) {
  const uint64_t first = sw128_descriptor(kDescriptorAddressMask + 1 - 16, 16, kAtom);
  EXPECT_NE(descriptor_plus(first, 16), sw128_descriptor(kDescriptorAddressMask + 1, 16, kAtom));
  EXPECT_EQ((descriptor_plus(first, 16) >> 14) & 3, 1u);
}

}  // namespace
}  // namespace flashcheck::tensor_core
