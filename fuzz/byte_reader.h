// Reads fuzzer bytes as typed fields; past the end every read gives zero, so any byte string decodes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace flashcheck::fuzz {

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  uint8_t u8() { return pos_ < bytes_.size() ? bytes_[pos_++] : 0; }
  uint64_t u64() {
    uint64_t x = 0;
    for (int i = 0; i < 8; ++i) x |= uint64_t{u8()} << (8 * i);
    return x;
  }
  uint32_t u32() { return static_cast<uint32_t>(u64() & 0xffffffffu); }
  float f32_bits() {
    uint32_t bits = 0;
    for (int i = 0; i < 4; ++i) bits |= uint32_t{u8()} << (8 * i);
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  std::span<const uint8_t> rest() const { return bytes_.subspan(pos_ < bytes_.size() ? pos_ : bytes_.size()); }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

}  // namespace flashcheck::fuzz
