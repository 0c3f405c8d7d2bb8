// An encoded element's bytes in a host buffer: 2 (fp16, bf16) or 4 (fp32) bytes in host byte order, the order the
// kernel reads and writes. The one load and store of them for input generation (inputs.cpp) and the runner.
#pragma once

#include <cstdint>
#include <cstring>

namespace flashcheck::detail {

inline uint32_t load_bits(int64_t esize, const uint8_t* src) {
  if (esize == 2) {
    uint16_t bits16 = 0;
    std::memcpy(&bits16, src, sizeof(bits16));
    return bits16;
  }
  uint32_t bits = 0;
  std::memcpy(&bits, src, sizeof(bits));
  return bits;
}

inline void store_bits(uint32_t bits, int64_t esize, uint8_t* dst) {
  if (esize == 2) {
    const uint16_t bits16 = static_cast<uint16_t>(bits);
    std::memcpy(dst, &bits16, sizeof(bits16));
  } else {
    std::memcpy(dst, &bits, sizeof(bits));
  }
}

}  // namespace flashcheck::detail
