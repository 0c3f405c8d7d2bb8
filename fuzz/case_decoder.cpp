// Binary layout (byte offsets; bytes past the end read as 0):
//   0 dtype | 1 mask | 2 flags (layout, pad, scale) | 3 head_dim | 4 batch | 5 heads
//   6-7 seqlen_q | 8-9 seqlen_k | 10-15 value specs of q, k, v (kind, parameter) | 16 injection count
//   then 7 bytes per injection (tensor, b, h, s lo, s hi, d, value) | then 8 bytes of seed (little endian)
//   | then the features: window (mode, left, right) | softcap | sink (kind, parameter)
//   | then the inference path: mode (>= 128: sequences, 1 + mode % 4 of them) | per sequence q (mode, offset),
//   k (mode, offset), extra | page | poison | splits | head_dim_v | dropout (p, seed, offset base, offset step).
// Menus hold the values worth hitting (LAPACK's 0, 1, tile-1, tile, tile+1, odd primes; dlatb4's value
// types); a seqlen is a small multiple of the tile the config picks, plus or minus two, and so is a window side.
// The features come last and read as "none" from zero bytes, so a stored input that ends before them decodes
// to the case it did before they existed.
#include "case_decoder.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <string_view>
#include <vector>

#include "byte_reader.h"
#include "flashcheck/dtype.h"
#include "flashcheck/mask_names.h"
#include "flashcheck/kernel_facts.h"

namespace flashcheck::fuzz {
namespace {

template <typename T, size_t N>
T pick(const std::array<T, N>& menu, uint8_t byte) {
  return menu[byte % N];
}

// Head dims: the tensor-core sizes and their neighbours, small odd sizes for the general path.
constexpr std::array<int64_t, 24> kHeadDims = {1,  2,  3,  4,  7,  8,   15,  16,  31,  32,  33,  48,
                                               63, 64, 65, 80, 96, 127, 128, 129, 160, 192, 255, 256};
constexpr std::array<int64_t, 8> kTileMultiples = {0, 1, 1, 2, 2, 3, 4, 8};
constexpr std::array<int64_t, 15> kOddSeqlens = {1, 2, 3, 5, 7, 11, 13, 17, 31, 61, 127, 251, 257, 509, 1021};
constexpr std::array<int64_t, 4> kPads = {0, 1, 2, 8};

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Injected values: the specials, the fp16/bf16/fp32 range ends, a subnormal of each format, large logits.
constexpr std::array<double, 16> kInjectValues = {kNaN,   kInf,   -kInf, -0.0, 0.0,  1e4,   -1e4,   65504.0,
                                                  -65504, 3.0e38, 1e-40, 6e-8, 1e30, 100.0, -100.0, 1.0};

// `wide`: the medium profile's longer "any length" menu (steps of 2048 instead of 256).
int64_t seqlen_from(uint8_t mode, uint8_t offset, int64_t block, bool wide = false) {
  switch (mode % 4) {
    case 0: {  // around a tile boundary
      const int64_t s = pick(kTileMultiples, static_cast<uint8_t>(mode / 4)) * block + (offset % 5) - 2;
      return std::max<int64_t>(s, 0);
    }
    case 1:
      return offset % 33;  // one tile or less, 0 included
    case 2:
      return pick(kOddSeqlens, offset);
    default:
      return offset + (wide ? 2048 : 256) * ((mode / 4) % 4);  // anything up to 1023 (6399 when wide)
  }
}

ValueSpec value_spec_from(uint8_t kind, uint8_t param) {
  const uint8_t hi = param >> 4;
  switch (kind % 8) {
    case 0: {
      constexpr std::array<double, 6> kMu = {0.0, 0.0, 0.0, 1.0, -3.0, 10.0};
      constexpr std::array<double, 8> kSigma = {1.0, 0.5, 3.0, 10.0, 30.0, 100.0, 1e-3, 300.0};
      return {DistKind::kNormal, pick(kMu, hi), pick(kSigma, param)};
    }
    case 1: {
      constexpr std::array<std::pair<double, double>, 6> kRanges = {
          {{-1.0, 1.0}, {0.0, 1.0}, {-10.0, 10.0}, {-1e-3, 1e-3}, {-100.0, 100.0}, {1.0, 2.0}}};
      const auto [lo, hi_value] = pick(kRanges, param);
      return {DistKind::kUniform, lo, hi_value};
    }
    case 2: {
      constexpr std::array<double, 8> kConst = {0.0, 1.0, -1.0, 0.5, 3.0, -100.0, 1e-3, 1000.0};
      return {DistKind::kConst, pick(kConst, param), 0.0};
    }
    case 3: {
      constexpr std::array<double, 6> kFrac = {1.0, 0.5, 0.1, 0.01, 1e-3, 0.9};
      return {DistKind::kNearMax, pick(kFrac, param), 0.0};
    }
    case 4:
      return {DistKind::kSubnormal, 0.0, 0.0};
    case 5: {
      constexpr std::array<std::pair<double, double>, 5> kRamps = {
          {{-1.0, 1.0}, {0.0, 10.0}, {-10.0, 10.0}, {0.0, 100.0}, {-30.0, 30.0}}};
      const auto [lo, hi_value] = pick(kRamps, param);
      return {DistKind::kRamp, lo, hi_value};
    }
    case 6: {
      constexpr std::array<double, 3> kSigma = {1.0, 0.5, 3.0};
      constexpr std::array<double, 4> kBig = {10.0, 100.0, 1e3, 1e4};
      return {DistKind::kDominant, pick(kSigma, param), pick(kBig, hi)};
    }
    default:
      return {DistKind::kNegZero, 0.0, 0.0};
  }
}

// A window side: unbounded, the diagonal, small, a tile multiple -1/0/+1, or at and past the longest seqlen.
int64_t window_side_from(uint8_t byte, int64_t block_n, int64_t longest) {
  switch (byte % 8) {
    case 0:
      return -1;
    case 1:
      return 0;
    case 2:
      return 1 + (byte >> 3) % 8;
    case 3:
    case 4:
      return (1 + (byte >> 3) % 3) * block_n + ((byte >> 5) % 3) - 1;
    case 5:
      return longest + (byte >> 3) % 2;
    case 6:
      return int64_t{1} << 40;
    default:
      return (byte >> 3) * std::max<int64_t>(longest, 1) / 32;
  }
}

// Softcaps: off for half the bytes, else saturating, typical or large.
float softcap_from(uint8_t byte) {
  constexpr std::array<float, 8> kSoftcaps = {0.5f, 1.0f, 2.0f, 5.0f, 20.0f, 30.0f, 50.0f, 1e4f};
  return byte < 128 ? 0.0f : pick(kSoftcaps, byte);
}

// Sinks: none for half the kind bytes; else far above or below the scores, near them, per-head mixtures, or the
// special values (-inf: no sink; +inf: all the weight; NaN: a NaN row).
std::optional<ValueSpec> sink_from(uint8_t kind, uint8_t param) {
  if (kind < 128) return std::nullopt;
  switch (kind % 4) {
    case 0: {
      constexpr std::array<double, 12> kConst = {-kInf, kInf, kNaN, 0.0,  30.0,  -30.0,
                                                 80.0,  -80.0, 1e4, -1e4, 1e30, -1e30};
      return ValueSpec{DistKind::kConst, pick(kConst, param), 0.0};
    }
    case 1: {
      constexpr std::array<double, 4> kSigma = {1.0, 2.0, 4.0, 30.0};
      return ValueSpec{DistKind::kNormal, 0.0, pick(kSigma, param)};
    }
    case 2:
      return ValueSpec{DistKind::kRamp, -100.0, 100.0};
    default:
      return ValueSpec{DistKind::kDominant, 1.0, 200.0};
  }
}

std::optional<float> scale_from(uint8_t selector, int64_t head_dim) {
  switch (selector % 8) {
    case 4:
      return 1.0f;
    case 5:
      return 0.0f;  // every score equal: a uniform softmax whatever the inputs
    case 6:
      return -1.0f / std::sqrt(static_cast<float>(head_dim));
    case 7:
      return 10.0f;
    default:
      return std::nullopt;  // the default 1/sqrt(d), half of all inputs
  }
}

// Tile sizes the kernel would use for this shape; 64 when no config serves it (the seqlen does not matter).
// The probe is the unpadded shape at the default scale, so the mapping from bytes to cases stays the one the
// stored corpora were built with.
// A length clamped to `cap` (0: none) keeping its place relative to the tiles where it can: whole tiles come off
// (1026 = 8 * 128 + 2 becomes 898 = 7 * 128 + 2 under a cap of 1000); a cap below one tile takes the length
// modulo cap + 1. Deterministic, so a crash file decodes to the same case under the same profile.
int64_t fit(int64_t length, int64_t cap, int64_t block) {
  if (cap <= 0 || length <= cap) return length;
  const int64_t tiles = (length - cap + block - 1) / block;
  const int64_t shorter = length - tiles * block;
  return shorter >= 0 ? shorter : length % (cap + 1);
}

std::pair<int64_t, int64_t> tile_sizes(const Case& c) {
  Case probe = c;
  probe.batch = std::max<int64_t>(c.batch, 1);
  probe.seqlen_q = probe.seqlen_k = 128;
  probe.pad = 0;
  probe.scale.reset();
  const KernelConfig config = kernel_config(case_params(probe));
  return {config.block_m > 0 ? config.block_m : 64, config.block_n > 0 ? config.block_n : 64};
}

// The masks that take no window (masks.def order), picked by a byte; window masks come from the window byte.
Mask plain_mask(uint8_t byte) {
  std::vector<Mask> plain;
  for (const MaskName& m : kMaskNames) {
    if (!m.takes_window) plain.push_back(m.mask);
  }
  return plain[byte % plain.size()];
}

// The window mask of an alignment.
Mask window_mask(Alignment alignment) {
  for (const MaskName& m : kMaskNames) {
    if (m.takes_window && m.alignment == alignment) return m.mask;
  }
  return Mask::kNone;  // masks.def has a window mask of each alignment
}

// The dtypes a byte picks: the rows of dtypes.def with a case weight (f8e4m3, of weight 0, is drawn only where asked
// for by name), in table order, so that a corpus file keeps its dtype when a row of weight 0 joins the table.
DType fuzzed_dtype(uint8_t byte) {
  std::vector<DType> rows;
  for (const DTypeInfo& row : kDTypes) {
    if (row.case_weight > 0) rows.push_back(row.dtype);
  }
  return rows[byte % rows.size()];
}

Case decode_binary(std::span<const uint8_t> bytes, SizeProfile profile) {
  const SizeBounds bounds = size_bounds(profile);
  const bool wide = profile == SizeProfile::kMedium;
  ByteReader in(bytes);
  Case c;
  c.dtype = fuzzed_dtype(in.u8());
  c.mask = plain_mask(in.u8());
  const uint8_t flags = in.u8();
  c.layout = (flags & 1) ? Layout::kBSHD : Layout::kBHSD;
  c.pad = pick(kPads, static_cast<uint8_t>(flags >> 1));
  const uint8_t head_dim_byte = in.u8();
  c.head_dim = head_dim_byte < 240 ? pick(kHeadDims, head_dim_byte) : 1 + in.u8();
  c.scale = scale_from(static_cast<uint8_t>(flags >> 3), c.head_dim);
  const uint8_t batch_byte = in.u8();
  c.batch = batch_byte == 255 ? 0 : 1 + batch_byte % 3;
  const uint8_t heads_byte = in.u8();
  c.heads_kv = 1 + heads_byte % 3;
  c.heads_q = c.heads_kv * (1 + (heads_byte / 3) % 4);

  const auto [block_m, block_n] = tile_sizes(c);
  const uint8_t sq_mode = in.u8(), sq_offset = in.u8();
  const uint8_t sk_mode = in.u8(), sk_offset = in.u8();
  // Rows per (batch, head) pair the profile leaves (0: unbounded).
  const auto rows_cap = [&](int64_t sequences) {
    return bounds.max_rows > 0 ? std::max<int64_t>(bounds.max_rows / std::max<int64_t>(sequences * c.heads_q, 1), 1) : 0;
  };
  c.seqlen_q = fit(seqlen_from(sq_mode, sq_offset, block_m, wide), rows_cap(c.batch), block_m);
  const auto keys_cap = [&](int64_t sequences) {
    return bounds.max_keys > 0 ? std::max<int64_t>(bounds.max_keys / std::max<int64_t>(sequences * c.heads_kv, 1), 1)
                               : 0;
  };
  c.seqlen_k = fit(seqlen_from(sk_mode, sk_offset, block_n, wide), keys_cap(c.batch), block_n);

  for (ValueSpec* spec : {&c.q, &c.k, &c.v}) {
    const uint8_t kind = in.u8();
    *spec = value_spec_from(kind, in.u8());
  }

  const uint8_t inject_byte = in.u8();
  const int inject_count = inject_byte < 160 ? 0 : 1 + inject_byte % 3;
  for (int n = 0; n < inject_count; ++n) {
    Injection inj;
    inj.tensor = "qkv"[in.u8() % 3];
    const int64_t heads = inj.tensor == 'q' ? c.heads_q : c.heads_kv;
    const int64_t seqlen = inj.tensor == 'q' ? c.seqlen_q : c.seqlen_k;
    const uint8_t b = in.u8(), h = in.u8(), s_lo = in.u8(), s_hi = in.u8(), d = in.u8();
    inj.value = pick(kInjectValues, in.u8());
    if (c.batch == 0 || seqlen == 0) continue;  // nowhere to put it
    inj.b = b % c.batch;
    inj.h = h % heads;
    inj.s = (s_lo | (int64_t{s_hi} << 8)) % seqlen;
    inj.d = d % c.head_dim;
    c.inject.push_back(inj);
  }
  c.seed = in.u64();

  const uint8_t window_mode = in.u8(), left = in.u8(), right = in.u8();
  if (window_mode % 4 != 0) {
    // A window mask of the case's alignment (none counts as top-left), aimed at the K tiles.
    c.mask = window_mask(window_mode % 4 == 1 ? Alignment::kBottomRight : find_mask(c.mask)->alignment);
    const int64_t longest = std::max(c.seqlen_q, c.seqlen_k);
    c.window_left = window_side_from(left, block_n, longest);
    c.window_right = window_side_from(right, block_n, longest);
  }
  c.softcap = softcap_from(in.u8());
  const uint8_t sink_kind = in.u8();
  c.sink = sink_from(sink_kind, in.u8());

  // The inference path (missing bytes read as zero: a dense case): sequences of their own lengths, aimed at the
  // tiles like the dense sizes, slots past their keys, a page size, a poison and a split count.
  const uint8_t seq_mode = in.u8();
  if (seq_mode >= 128 && c.batch > 0) {
    const int64_t count = 1 + seq_mode % 4;
    c.seqs.clear();
    c.inject.clear();  // injections address dense positions
    int64_t longest_q = 0, longest_k = 0;
    for (int64_t b = 0; b < count; ++b) {
      Sequence s;
      const uint8_t q_mode = in.u8(), q_offset = in.u8(), k_mode = in.u8(), k_offset = in.u8(), extra = in.u8();
      s.q = std::min(fit(seqlen_from(q_mode, q_offset, block_m, wide), rows_cap(count), block_m), c.seqlen_q);
      s.k = std::min(fit(seqlen_from(k_mode, k_offset, block_n, wide), keys_cap(count), block_n), c.seqlen_k);
      s.extra = extra < 160 ? 0 : extra % 40;
      if (bounds.max_keys > 0) s.extra = std::min(s.extra, keys_cap(count) - s.k);  // capacities stay under the cap
      longest_q = std::max(longest_q, s.q);
      longest_k = std::max(longest_k, s.capacity());
      c.seqs.push_back(s);
    }
    c.batch = count;
    c.seqlen_q = longest_q;
    c.seqlen_k = longest_k;
    const std::array<int64_t, 7> pages{0, 1, 3, 16, block_n, 2 * block_n, 256};
    c.page = pick(pages, in.u8());
    c.poison = static_cast<Poison>(in.u8() % kPoisonCount);
    constexpr std::array<int32_t, 5> kSplits{1, 2, 3, 17, 0};
    c.splits = pick(kSplits, in.u8());
  }
  // V's and O's own head dim (a missing byte: equal dims) in one input of eight; V's injections move inside it.
  if (const uint8_t dv_byte = in.u8(); dv_byte >= 224) {
    c.head_dim_v = pick(kHeadDims, dv_byte);
    for (Injection& inj : c.inject) {
      if (inj.tensor == 'v') inj.d %= c.head_dim_v;
    }
  }
  // Dropout (a missing byte: none) in one input of eight, where it runs (neither paged K/V nor a split count above 1):
  // p from a menu (2^-33 drops nothing and scales by 1), the mask's seed a byte, its offset just below 2^32 or 2^64
  // (the wraps a 32-bit or 64-bit counter meets), at 2^40 or near 0.
  if (const uint8_t drop_byte = in.u8(); drop_byte >= 224 && c.page == 0 && c.splits <= 1) {
    constexpr std::array<float, 5> kDropouts{0.01f, 0.1f, 0.5f, 0.9f, 0x1p-33f};
    constexpr std::array<uint64_t, 4> kOffsets{0, (uint64_t{1} << 32) - 8, ~uint64_t{0} - 8, uint64_t{1} << 40};
    c.dropout = pick(kDropouts, drop_byte);
    c.drop_seed = in.u8();
    c.drop_offset = pick(kOffsets, in.u8()) + in.u8() % 8;
  }
  return c;
}

// Saturating product of non-negative factors; a negative factor counts as 0 (such a case is invalid anyway).
int64_t saturating_product(std::initializer_list<int64_t> factors) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t product = 1;
  for (int64_t f : factors) {
    if (f <= 0) return 0;
    if (product > kMax / f) return kMax;
    product *= f;
  }
  return product;
}

int64_t saturating_sum(std::initializer_list<int64_t> terms) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t sum = 0;
  for (int64_t t : terms) {
    if (t > kMax - sum) return kMax;
    sum += t;
  }
  return sum;
}

}  // namespace

int64_t case_work(const Case& c) {
  return saturating_product({c.batch, c.heads_q, c.seqlen_q, c.seqlen_k, std::max(c.head_dim, c.value_dim())});
}

int64_t case_elements(const Case& c) {
  // Rows are padded by `pad` elements; count it so a huge pad cannot slip through.
  const int64_t pad = std::max<int64_t>(c.pad, 0);
  const int64_t row = saturating_sum({c.head_dim, pad}), value_row = saturating_sum({c.value_dim(), pad});
  const int64_t q_rows = saturating_product({c.batch, c.heads_q, c.seqlen_q});
  const int64_t kv_rows = saturating_product({c.batch, c.heads_kv, c.seqlen_k});
  const int64_t rows = saturating_sum({q_rows, kv_rows});  // Q and K; O and V have value rows as many
  return saturating_sum({saturating_product({rows, row}), saturating_product({rows, value_row})});
}

bool within_limits(const Case& c, const DecodeLimits& limits) {
  return case_work(c) <= limits.max_work && case_elements(c) <= limits.max_elements;
}

SizeBounds size_bounds(SizeProfile profile) {
  switch (profile) {
    case SizeProfile::kSmall:
      return {256, 1024};
    case SizeProfile::kMedium:
      return {4096, 8192};
    case SizeProfile::kAll:
      break;
  }
  return {};
}

const char* to_string(SizeProfile profile) {
  switch (profile) {
    case SizeProfile::kSmall:
      return "small";
    case SizeProfile::kMedium:
      return "medium";
    case SizeProfile::kAll:
      break;
  }
  return "all";
}

bool profile_from_environment(SizeProfile* profile) {
  const char* name = std::getenv("FLASHCHECK_FUZZ_PROFILE");
  *profile = SizeProfile::kAll;
  if (name == nullptr || *name == '\0') return true;
  for (SizeProfile p : {SizeProfile::kAll, SizeProfile::kSmall, SizeProfile::kMedium}) {
    if (std::string_view(name) == to_string(p)) {
      *profile = p;
      return true;
    }
  }
  return false;
}

int64_t case_rows(const Case& c) {
  if (c.seqs.empty()) return saturating_product({c.batch, c.heads_q, c.seqlen_q});
  int64_t q = 0;
  for (const Sequence& s : c.seqs) q = saturating_sum({q, std::max<int64_t>(s.q, 0)});
  return saturating_product({c.heads_q, q});
}

int64_t case_key_rows(const Case& c) {
  if (c.seqs.empty()) return saturating_product({c.batch, c.heads_kv, c.seqlen_k});
  int64_t k = 0;
  for (const Sequence& s : c.seqs) k = saturating_sum({k, std::max<int64_t>(s.capacity(), 0)});
  return saturating_product({c.heads_kv, k});
}

bool within_profile(const Case& c, SizeProfile profile) {
  const SizeBounds bounds = size_bounds(profile);
  return (bounds.max_rows <= 0 || case_rows(c) <= bounds.max_rows) &&
         (bounds.max_keys <= 0 || case_key_rows(c) <= bounds.max_keys);
}

Status decode_case(std::span<const uint8_t> bytes, Case* out, DecodeMode* mode, SizeProfile profile) {
  // Text mode: printable ASCII (and tabs) up to the first newline (a CRLF's carriage return dropped), beginning,
  // after blanks, with a dtype name and a blank.
  size_t end = 0;
  while (end < bytes.size() && bytes[end] != '\n') {
    const uint8_t ch = bytes[end];
    const bool line_end_cr = ch == '\r' && (end + 1 == bytes.size() || bytes[end + 1] == '\n');
    if ((ch < 0x20 && ch != '\t' && !line_end_cr) || ch > 0x7e) break;
    ++end;
  }
  if (end > 0 && (end == bytes.size() || bytes[end] == '\n')) {
    std::string_view line(reinterpret_cast<const char*>(bytes.data()), end);
    if (line.back() == '\r') line.remove_suffix(1);
    const size_t first = line.find_first_not_of(" \t");
    const std::string_view word = first == std::string_view::npos ? std::string_view{} : line.substr(first);
    if (dtype_from_name(word.substr(0, word.find_first_of(" \t")))) {
      if (mode) *mode = DecodeMode::kText;
      return parse_case(word, out);
    }
  }
  if (mode) *mode = DecodeMode::kBinary;
  *out = decode_binary(bytes, profile);
  return Status::ok_status();
}

const char* to_string(DecodeMode mode) { return mode == DecodeMode::kText ? "text" : "binary"; }

}  // namespace flashcheck::fuzz
