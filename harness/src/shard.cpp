// Sharding of property runs (flashcheck/shard.h): integer arithmetic only, so every shard of every host
// computes the same plan.
#include "flashcheck/shard.h"

#include <charconv>
#include <string>

namespace flashcheck {
namespace {

bool parse_int(std::string_view text, int* out) {
  if (text.empty() || text.front() == '-' || text.front() == '+') return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

// SplitMix64's finaliser: a bijection of uint64_t.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

Status parse_shard(std::string_view text, Shard* out) {
  const size_t slash = text.find('/');
  Shard shard;
  if (slash == std::string_view::npos || !parse_int(text.substr(0, slash), &shard.index) ||
      !parse_int(text.substr(slash + 1), &shard.count) || shard.count < 1 || shard.index >= shard.count) {
    return {StatusCode::kInvalidArgument,
            "shard '" + std::string(text) + "' is not i/n with whole numbers 0 <= i < n (e.g. 0/4 ... 3/4)"};
  }
  *out = shard;
  return Status::ok_status();
}

int64_t shard_cases(int64_t total, Shard shard) {
  return total / shard.count + (shard.index < total % shard.count ? 1 : 0);
}

int64_t shard_first_case(int64_t total, Shard shard) {
  const int64_t base = total / shard.count;
  const int64_t extra = total % shard.count;
  return base * shard.index + (shard.index < extra ? shard.index : extra);
}

uint64_t shard_seed(uint64_t base, Shard shard) {
  if (shard.count == 1) return base;
  // base + (index + 1) * golden ratio, mixed: distinct for distinct indices (mix is a bijection).
  return mix(base + (static_cast<uint64_t>(shard.index) + 1) * 0x9E3779B97F4A7C15ull);
}

}  // namespace flashcheck
