// An encoded element's bytes in a host buffer: dtype_size bytes (dtypes.def: 1 to 4) in host byte order, the
// order the kernel reads and writes, holding the low bytes of the element's bits. The one load and store of them
// for input generation (inputs.cpp) and the runner.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace flashcheck::detail {

// The low bytes of a uint32_t are its first bytes in memory only on a little-endian host (x86-64, AArch64).
static_assert(std::endian::native == std::endian::little, "element_bytes.h: elements are stored little-endian");

inline uint32_t load_bits(int64_t esize, const uint8_t* src) {
  uint32_t bits = 0;
  std::memcpy(&bits, src, static_cast<size_t>(esize));
  return bits;
}

inline void store_bits(uint32_t bits, int64_t esize, uint8_t* dst) {
  std::memcpy(dst, &bits, static_cast<size_t>(esize));
}

}  // namespace flashcheck::detail
