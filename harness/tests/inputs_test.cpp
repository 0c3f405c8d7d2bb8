// Inputs: Philox known answers, the deterministic log/cos against libm, golden hashes of fixed case lines
// (the bytes must be identical on every machine and compiler), each distribution's documented shape,
// layouts and NaN padding, injections, the sink's per-head values, the memory limit, and sequences: the dense
// case's values in packed and paged layouts, poison in every slot no kernel may read, the page table's shuffle,
// the index arrays; and a grad case's dO: laid out like O, on a stream of its own, leaving Q, K, V and every
// forward hash alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <string>

#include "flashcheck/inputs.h"

#include "case_inputs.h"

namespace flashcheck {
namespace {

using test::inputs_for;

uint32_t element_bits(const HostInputs& in, const std::vector<uint8_t>& bytes, int64_t offset) {
  if (dtype_size(in.params.dtype) == 4) {
    uint32_t bits;
    std::memcpy(&bits, bytes.data() + offset * 4, 4);
    return bits;
  }
  uint16_t bits;
  std::memcpy(&bits, bytes.data() + offset * 2, 2);
  return bits;
}

// Random123's tests/kat_vectors, the three philox4x32 10-round lines: counter, key, expected output.
TEST(Philox, KnownAnswerVectors) {
  struct Kat {
    uint32_t counter[4];
    uint32_t key[2];
    uint32_t expected[4];
  };
  const Kat kKats[] = {
      {{0x00000000, 0x00000000, 0x00000000, 0x00000000}, {0x00000000, 0x00000000},
       {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& kat : kKats) {
    uint32_t out[4];
    Philox4x32::generate(kat.counter, kat.key, out);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], kat.expected[i]) << "word " << i;
  }
}

TEST(DetMath, LogAndCosAreAccurate) {
  constexpr int kSamples = 200000;
  double worst_log = 0.0, worst_cos = 0.0;
  for (int n = 1; n <= kSamples; ++n) {
    const double u = static_cast<double>(n) / kSamples;          // (0, 1]
    const double tiny = std::ldexp(u, -1000 + (n % 1000));       // spans exponents
    for (double x : {u, tiny, 1.0 / u}) {
      const double err = std::fabs(detmath::log(x) - std::log(x));
      worst_log = std::max(worst_log, err / std::max(1.0, std::fabs(std::log(x))));
    }
    const double t = static_cast<double>(n - 1) / kSamples;  // [0, 1)
    worst_cos = std::max(worst_cos, std::fabs(detmath::cos_2pi(t) - std::cos(2 * std::numbers::pi * t)));
  }
  EXPECT_LT(worst_log, 4e-16);  // a few ulp relative (absolute near log x = 0)
  EXPECT_LT(worst_cos, 2e-15);  // libm's reference itself carries the rounding of 2*pi*t
  EXPECT_EQ(detmath::log(1.0), 0.0);
  EXPECT_EQ(detmath::cos_2pi(0.0), 1.0);
  EXPECT_EQ(detmath::cos_2pi(0.5), -1.0);
}

// Golden hashes: FNV-1a 64 of the q, k, v bytes of fixed case lines. Computed once; any change to Philox,
// the distributions, rounding, layout or padding shows up here, and so does a compiler that evaluates the
// generator differently (the lead runs this on the GPU machine built with another compiler).
TEST(Inputs, GoldenHashes) {
  struct Golden {
    const char* line;
    uint64_t hash;
  };
  const Golden kGolden[] = {
      {"f32 b=1 hq=2 hkv=1 sq=7 sk=9 d=16 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=1",
       0x70e5f2538ec72b3bull},
      {"f16 b=2 hq=4 hkv=2 sq=33 sk=65 d=64 mask=causal-br q=normal(0,3) k=normal(0,3) v=uniform(-1,1) seed=42",
       0x320409474e1cca6eull},
      {"bf16 b=1 hq=8 hkv=8 sq=64 sk=64 d=128 mask=causal-tl q=uniform(-2,2) k=uniform(-2,2) v=normal(0.5,2) "
       "seed=18446744073709551615",
       0xf6546e3b5d444b03ull},
      {"f16 b=1 hq=1 hkv=1 sq=5 sk=6 d=8 mask=none layout=bshd pad=3 q=nearmax(0.5) k=nearmax(1) v=nearmax(0.01) seed=7",
       0xa086ab3eea777849ull},
      {"bf16 b=2 hq=2 hkv=1 sq=9 sk=11 d=32 mask=none q=subnormal() k=subnormal() v=negzero() seed=3",
       0x39a7af9a67a48cfbull},
      {"f32 b=1 hq=1 hkv=1 sq=13 sk=13 d=24 mask=none q=subnormal() k=normal(0,1e-30) v=nearmax(1e-3) seed=11",
       0x72c94237b33c65cdull},
      {"f16 b=1 hq=2 hkv=2 sq=40 sk=70 d=16 mask=causal-br q=ramp(-4,4) k=ramp(0,8) v=ramp(1,-1) seed=5",
       0x51e8a5d3be368ec7ull},
      {"bf16 b=3 hq=2 hkv=2 sq=17 sk=19 d=64 mask=none q=dominant(1,40) k=dominant(0.5,30) v=dominant(1,10) seed=8",
       0xfbf0e6503f513d12ull},
      {"f32 b=1 hq=1 hkv=1 sq=3 sk=4 d=5 mask=none q=const(0.3) k=const(-0) v=const(nan) seed=0",
       0x2cacf3fb0d6feb47ull},
      {"f16 b=1 hq=1 hkv=1 sq=4 sk=4 d=8 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) "
       "inject=q[0,0,1,3]:nan;k[0,0,2,0]:-inf;v[0,0,0,0]:1000000;v[0,0,1,1]:-0 seed=12",
       0x80dae7c3da9e1b40ull},
      {"f32 b=2 hq=3 hkv=3 sq=31 sk=17 d=80 mask=none layout=bshd pad=5 scale=0.5 q=normal(-1,0.001) "
       "k=uniform(1e-3,2e-3) v=normal(100,30) seed=987654321",
       0x62ea1a868dccae94ull},
      {"bf16 b=1 hq=4 hkv=1 sq=100 sk=0 d=256 mask=causal-tl pad=1 q=normal(0,10) k=normal(0,1) v=normal(0,1) seed=2",
       0x9f63060205f61259ull},
      // Windows and softcaps leave the bytes alone (the first line's hash); a sink adds its fp32 values.
      {"f32 b=1 hq=2 hkv=1 sq=7 sk=9 d=16 mask=window-br window=3,0 softcap=5 q=normal(0,1) k=normal(0,1) "
       "v=normal(0,1) seed=1",
       0x70e5f2538ec72b3bull},
      {"f16 b=2 hq=8 hkv=2 sq=33 sk=65 d=64 mask=window-tl window=16,16 q=normal(0,3) k=normal(0,3) v=uniform(-1,1) "
       "sink=normal(0,4) seed=42",
       0xc291d8162ca81a22ull},
      {"bf16 b=1 hq=5 hkv=5 sq=3 sk=3 d=8 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) sink=dominant(1,100) "
       "seed=77",
       0xadd4c17f0ffae977ull},
      // grad=0 is the forward case (the first line's hash); grad=1 adds dO's bytes.
      {"f32 b=1 hq=2 hkv=1 sq=7 sk=9 d=16 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) grad=0 seed=1",
       0x70e5f2538ec72b3bull},
      {"f32 b=1 hq=2 hkv=1 sq=7 sk=9 d=16 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) grad=1 "
       "dout=normal(0,1) seed=1",
       0xa6be2a2302516222ull},
      {"bf16 b=2 hq=4 hkv=2 sq=9 sk=11 d=32 dv=16 mask=causal-br layout=bshd pad=3 q=normal(0,1) k=normal(0,1) "
       "v=normal(0,1) grad=1 dout=dominant(1,30) seed=6",
       0x26d1373f9c6577c5ull},
  };
  for (const Golden& golden : kGolden) {
    const HostInputs in = inputs_for(golden.line);
    EXPECT_EQ(in.hash(), golden.hash) << golden.line;
  }
}

// ---- Sequences: packed and paged layouts, poison, index arrays.

// Where element [b, h, s, d] of Q (O) and of K (V) lies in the encoded buffers of a case with sequences: the
// test's own reading of case.h's layouts, from the strides and the index arrays.
int64_t q_offset(const HostInputs& in, int64_t b, int64_t h, int64_t s, int64_t d) {
  const Strides& st = in.params.q_stride;
  return (in.cu_seqlens_q[static_cast<size_t>(b)] + s) * st.row + h * st.head + d;
}
int64_t kv_offset(const HostInputs& in, int64_t b, int64_t h, int64_t s, int64_t d) {
  const Params& p = in.params;
  const Strides& st = p.k_stride;
  if (in.page_table.empty()) return (in.cu_seqlens_k[static_cast<size_t>(b)] + s) * st.row + h * st.head + d;
  const int64_t page = in.page_table[static_cast<size_t>(b * p.max_pages_per_seq + s / p.page_size)];
  return page * st.batch + (s % p.page_size) * st.row + h * st.head + d;
}

uint64_t double_bits(double x) { return std::bit_cast<uint64_t>(x); }

// A case with sequences holds the dense case's values (the same b, sq, sk, distributions, injections and seed) at
// every position inside a sequence, encoded where its layout puts them, and 0 in the canonical copies past a
// sequence's end. Ramp and dominant run over sq and sk, as in the dense case.
TEST(Inputs, SequencesHoldTheDenseCasesValues) {
  const std::string dense_line =
      "f16 b=3 hq=4 hkv=2 sq=9 sk=12 d=8 mask=none q=ramp(-1,1) k=dominant(1,30) v=normal(0,2) "
      "inject=q[2,3,4,7]:nan;v[0,1,2,0]:-inf;k[2,0,11,1]:65504 seed=21";
  const HostInputs dense = inputs_for(dense_line);
  const std::string rest = " q=ramp(-1,1) k=dominant(1,30) v=normal(0,2) "
                           "inject=q[2,3,4,7]:nan;v[0,1,2,0]:-inf;k[2,0,11,1]:65504 seed=21";
  const std::string shape = "f16 b=3 hq=4 hkv=2 sq=9 sk=12 d=8 mask=none";
  const int64_t q_len[3] = {9, 0, 5}, k_len[3] = {5, 0, 12};
  for (const std::string layout : {" pad=1 seqs=9:5+7,0:0,5:12", " layout=bshd pad=2 seqs=9:5+7,0:0,5:12",
                                   " seqs=9:5+7,0:0,5:12 page=3 poison=inf",
                                   " layout=bshd seqs=9:5+7,0:0,5:12 page=5 poison=zero splits=2"}) {
    const HostInputs in = inputs_for(shape + layout + rest);
    ASSERT_EQ(in.q_exact.size(), dense.q_exact.size()) << layout;
    ASSERT_EQ(in.k_exact.size(), dense.k_exact.size()) << layout;
    for (int64_t b = 0; b < 3; ++b) {
      for (const bool is_q : {true, false}) {
        const int64_t heads = is_q ? 4 : 2, seqlen = is_q ? 9 : 12, length = is_q ? q_len[b] : k_len[b];
        for (const int tensor : is_q ? std::vector<int>{0} : std::vector<int>{1, 2}) {
          const std::vector<double>& exact = tensor == 0 ? in.q_exact : tensor == 1 ? in.k_exact : in.v_exact;
          const std::vector<double>& want = tensor == 0 ? dense.q_exact : tensor == 1 ? dense.k_exact : dense.v_exact;
          const std::vector<uint8_t>& bytes = tensor == 0 ? in.q : tensor == 1 ? in.k : in.v;
          const std::vector<uint8_t>& dense_bytes = tensor == 0 ? dense.q : tensor == 1 ? dense.k : dense.v;
          const Strides& dense_stride = tensor == 0 ? dense.params.q_stride : dense.params.k_stride;
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t s = 0; s < seqlen; ++s)
              for (int64_t d = 0; d < 8; ++d) {
                const size_t index = static_cast<size_t>(((b * heads + h) * seqlen + s) * 8 + d);
                if (s >= length) {
                  ASSERT_EQ(double_bits(exact[index]), double_bits(0.0)) << layout << " tensor " << tensor;
                  continue;
                }
                ASSERT_EQ(double_bits(exact[index]), double_bits(want[index]))
                    << layout << " tensor " << tensor << " [" << b << "," << h << "," << s << "," << d << "]";
                const int64_t offset = is_q ? q_offset(in, b, h, s, d) : kv_offset(in, b, h, s, d);
                const int64_t dense_offset = b * dense_stride.batch + h * dense_stride.head + s * dense_stride.row + d;
                ASSERT_EQ(element_bits(in, bytes, offset), element_bits(dense, dense_bytes, dense_offset))
                    << layout << " tensor " << tensor << " [" << b << "," << h << "," << s << "," << d << "]";
              }
        }
      }
    }
    EXPECT_TRUE(std::isnan(in.q_exact[static_cast<size_t>(((2 * 4 + 3) * 9 + 4) * 8 + 7)])) << layout;
  }
}

// The classes of memory no kernel may read: padding elements, a sequence's extra slots, the unused tail of its last
// page, the spare page. Each holds the case's poison, for every poison and dtype.
TEST(Inputs, PoisonFillsEveryNonDataSlot) {
  enum Slot { kData, kPad, kExtra, kPageTail, kSparePage, kSlotCount };
  const char* const kSlotNames[kSlotCount] = {"data", "pad", "extra", "page tail", "spare page"};
  for (const char* dtype : {"f32", "f16", "bf16"}) {
    for (const Poison poison : {Poison::kNaN, Poison::kInf, Poison::kZero}) {
      for (const char* layout : {"", " layout=bshd"}) {
        for (const char* paging : {"", " page=2"}) {
          const std::string line = std::string(dtype) + " b=3 hq=2 hkv=1 sq=4 sk=5 d=3 mask=none" + layout +
                                   " pad=2 seqs=4:2+3,1:0+4,3:5" + paging +
                                   (poison == Poison::kNaN ? "" : std::string(" poison=") + to_string(poison)) +
                                   " q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=3";
          const HostInputs in = inputs_for(line);
          const DType dt = in.params.dtype;
          const uint32_t want = poison == Poison::kNaN ? (dtype_size(dt) == 4 ? kInputPadBits32 : kInputPadBits16)
                                : poison == Poison::kInf ? encode_dtype(dt, std::numeric_limits<double>::infinity())
                                                         : 0u;
          const Params& p = in.params;
          const int64_t row = 5;  // d + pad
          // K: classify every element by where it lies, from the test's reading of the layout.
          const int64_t k_elements = static_cast<int64_t>(in.k.size()) / dtype_size(dt);
          std::vector<Slot> k_slot(static_cast<size_t>(k_elements), kSparePage);
          const int64_t k_len[3] = {2, 0, 5}, capacity[3] = {5, 4, 5};
          std::vector<bool> page_owned(static_cast<size_t>(std::max<int64_t>(p.num_pages, 0)), false);
          for (int64_t b = 0; b < 3; ++b) {
            const int64_t slots = in.page_table.empty() ? capacity[b] : sequence_pages({0, capacity[b], 0}, 2) * 2;
            for (int64_t s = 0; s < slots; ++s) {
              if (!in.page_table.empty()) page_owned[static_cast<size_t>(in.page_table[static_cast<size_t>(b * p.max_pages_per_seq + s / 2)])] = true;
              for (int64_t e = 0; e < row; ++e) {
                const Slot slot = e >= 3 ? kPad : s < k_len[b] ? kData : s < capacity[b] ? kExtra : kPageTail;
                k_slot[static_cast<size_t>(kv_offset(in, b, 0, s, 0) + e)] = slot;
              }
            }
          }
          int64_t seen[kSlotCount] = {};
          for (int64_t i = 0; i < k_elements; ++i) {
            const Slot slot = k_slot[static_cast<size_t>(i)];
            ++seen[slot];
            if (slot == kData) continue;
            ASSERT_EQ(element_bits(in, in.k, i), want) << line << ": K element " << i << " (" << kSlotNames[slot] << ")";
            ASSERT_EQ(element_bits(in, in.v, i), want) << line << ": V element " << i << " (" << kSlotNames[slot] << ")";
          }
          EXPECT_EQ(seen[kData], (2 + 0 + 5) * 3) << line;
          EXPECT_GT(seen[kPad], 0) << line;
          EXPECT_EQ(seen[kExtra], (3 + 4 + 0) * 3) << line;
          EXPECT_EQ(seen[kPageTail], *paging != '\0' ? 2 * 3 : 0) << line;  // capacities 5 in pages of 2
          EXPECT_EQ(seen[kSparePage], *paging != '\0' ? 2 * row : 0) << line;
          if (*paging != '\0') EXPECT_EQ(std::count(page_owned.begin(), page_owned.end(), false), 1) << line;
          // Q: every packed row is a sequence's row; only its padding is poison.
          for (int64_t i = 0; i < static_cast<int64_t>(in.q.size()) / dtype_size(dt); ++i) {
            const bool pad = (i % row) >= 3;
            if (pad) ASSERT_EQ(element_bits(in, in.q, i), want) << line << ": Q element " << i;
            if (!pad) ASSERT_NE(element_bits(in, in.q, i), want) << line << ": Q element " << i;
          }
          EXPECT_EQ(static_cast<int64_t>(in.q.size()) / dtype_size(dt), (4 + 1 + 3) * 2 * row) << line;
        }
      }
    }
  }
}

TEST(Inputs, PageTableIsASeededPermutation) {
  const std::string line =
      "f16 b=4 hq=2 hkv=1 sq=3 sk=20 d=4 mask=none seqs=3:20,1:1+6,0:0,2:9 page=3 q=normal(0,1) k=normal(0,1) "
      "v=normal(0,1) seed=";
  const HostInputs in = inputs_for(line + "7");
  const Params& p = in.params;
  ASSERT_EQ(p.num_pages, 7 + 3 + 0 + 3 + 1);
  ASSERT_EQ(p.max_pages_per_seq, 7);
  ASSERT_EQ(in.page_table.size(), size_t{4 * 7});
  const int64_t pages[4] = {7, 3, 0, 3};
  std::vector<int> uses(static_cast<size_t>(p.num_pages), 0);
  bool in_order = true;
  int32_t sequential = 0;
  for (int64_t b = 0; b < 4; ++b) {
    for (int64_t i = 0; i < 7; ++i) {
      const int32_t entry = in.page_table[static_cast<size_t>(b * 7 + i)];
      if (i >= pages[b]) {
        EXPECT_EQ(entry, p.num_pages + 7) << "unowned entry [" << b << ", " << i << "]";  // out of range on purpose
        continue;
      }
      ASSERT_GE(entry, 0);
      ASSERT_LT(entry, p.num_pages);
      ++uses[static_cast<size_t>(entry)];
      in_order = in_order && entry == sequential++;
    }
  }
  // Every page a sequence owns (every page it reads among them) is distinct; one page, the spare, is nobody's.
  EXPECT_EQ(std::count(uses.begin(), uses.end(), 1), p.num_pages - 1);
  EXPECT_EQ(std::count(uses.begin(), uses.end(), 0), 1);
  EXPECT_FALSE(in_order);  // shuffled
  EXPECT_EQ(inputs_for(line + "7").page_table, in.page_table);
  EXPECT_NE(inputs_for(line + "8").page_table, in.page_table);
  // The other index arrays, the per-sequence lengths and the pointers.
  EXPECT_EQ(in.cu_seqlens_q, (std::vector<int32_t>{0, 3, 4, 4, 6}));
  EXPECT_TRUE(in.cu_seqlens_k.empty());  // paged: the table rows are the sequences
  EXPECT_EQ(in.seqused_k, (std::vector<int32_t>{20, 1, 0, 9}));
  EXPECT_EQ(in.seqlens_q, (std::vector<int64_t>{3, 1, 0, 2}));
  EXPECT_EQ(in.seqlens_k, (std::vector<int64_t>{20, 1, 0, 9}));
  EXPECT_EQ(p.cu_seqlens_q, in.cu_seqlens_q.data());
  EXPECT_EQ(p.cu_seqlens_k, nullptr);
  EXPECT_EQ(p.seqused_k, in.seqused_k.data());
  EXPECT_EQ(p.page_table, in.page_table.data());
  EXPECT_EQ(p.total_q, 6);
  EXPECT_EQ(in.k.size(), size_t(p.num_pages * 3 * 4 * 2));
  const oracle::Problem problem = in.problem();
  EXPECT_EQ(problem.seqlens_q.data(), in.seqlens_q.data());
  EXPECT_EQ(problem.seqlens_k.data(), in.seqlens_k.data());
  EXPECT_EQ(problem.seqlens_k.size(), size_t{4});
  EXPECT_EQ(problem.seqlen_k, 20);
}

TEST(Inputs, IndexArraysFollowTheCase) {
  const std::string values = " q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=4";
  // Dense: none, null pointers, empty per-sequence lengths.
  const HostInputs dense = inputs_for("f16 b=2 hq=2 hkv=1 sq=5 sk=7 d=8 mask=none" + values);
  EXPECT_TRUE(dense.cu_seqlens_q.empty() && dense.cu_seqlens_k.empty() && dense.seqused_k.empty() &&
              dense.page_table.empty() && dense.seqlens_q.empty() && dense.seqlens_k.empty());
  EXPECT_EQ(dense.params.cu_seqlens_q, nullptr);
  EXPECT_EQ(dense.params.page_table, nullptr);
  EXPECT_TRUE(dense.problem().seqlens_q.empty());
  // Packed K/V without extra slots: cu_seqlens_k over the keys, no seqused_k.
  const HostInputs packed = inputs_for("f16 b=2 hq=2 hkv=1 sq=5 sk=7 d=8 mask=none seqs=5:7,2:3" + values);
  EXPECT_EQ(packed.cu_seqlens_q, (std::vector<int32_t>{0, 5, 7}));
  EXPECT_EQ(packed.cu_seqlens_k, (std::vector<int32_t>{0, 7, 10}));
  EXPECT_TRUE(packed.seqused_k.empty());
  EXPECT_EQ(packed.params.seqused_k, nullptr);
  EXPECT_EQ(packed.params.cu_seqlens_k, packed.cu_seqlens_k.data());
  EXPECT_EQ(packed.params.total_k, 10);
  // Extra slots: cu_seqlens_k over the capacities, seqused_k the keys.
  const HostInputs extra = inputs_for("f16 b=2 hq=2 hkv=1 sq=5 sk=7 d=8 mask=none seqs=5:4+3,2:3" + values);
  EXPECT_EQ(extra.cu_seqlens_k, (std::vector<int32_t>{0, 7, 10}));
  EXPECT_EQ(extra.seqused_k, (std::vector<int32_t>{4, 3}));
  EXPECT_EQ(extra.params.seqused_k, extra.seqused_k.data());
  // A copy rebinds to its own arrays; the hash covers them.
  HostInputs copy = extra;
  copy.bind();
  EXPECT_EQ(copy.params.cu_seqlens_q, copy.cu_seqlens_q.data());
  EXPECT_EQ(copy.params.seqused_k, copy.seqused_k.data());
  EXPECT_EQ(copy.hash(), extra.hash());
  for (std::vector<int32_t>* array : {&copy.cu_seqlens_q, &copy.cu_seqlens_k, &copy.seqused_k}) {
    HostInputs changed = copy;
    std::vector<int32_t>& target = array == &copy.cu_seqlens_q   ? changed.cu_seqlens_q
                                   : array == &copy.cu_seqlens_k ? changed.cu_seqlens_k
                                                                 : changed.seqused_k;
    target.back() += 1;
    EXPECT_NE(changed.hash(), extra.hash());
  }
  HostInputs paged = inputs_for("f16 b=2 hq=2 hkv=1 sq=5 sk=7 d=8 mask=none seqs=5:4+3,2:3 page=4" + values);
  const uint64_t paged_hash = paged.hash();
  paged.page_table.back() ^= 1;  // an entry nobody reads still counts: the table is an input
  EXPECT_NE(paged.hash(), paged_hash);
}

// FNV-1a 64 of the encoded tensors, the sink, the index arrays and dO of fixed lines with sequences: the packed and
// paged layouts, the poison and the page shuffle are bit for bit the same on every machine.
TEST(Inputs, GoldenHashesWithSequences) {
  struct Golden {
    const char* line;
    uint64_t hash;
  };
  const Golden kGolden[] = {
      {"f32 b=3 hq=2 hkv=1 sq=7 sk=9 d=16 mask=causal-br seqs=7:9,0:2,3:5+4 q=normal(0,1) k=normal(0,1) "
       "v=normal(0,1) seed=1",
       0xe0db98ef6a5bf7bull},
      {"bf16 b=2 hq=4 hkv=2 sq=33 sk=65 d=64 mask=none layout=bshd pad=3 seqs=33:60+5,17:1+2 page=16 poison=inf "
       "q=normal(0,3) k=dominant(1,30) v=ramp(-1,1) inject=k[1,1,0,5]:nan seed=42",
       0x6f17a1b2e09c2db4ull},
      {"f16 b=4 hq=1 hkv=1 sq=5 sk=12 d=8 mask=window-tl window=2,0 seqs=5:12,1:1,0:0,2:3+9 page=3 poison=zero "
       "splits=3 q=uniform(-2,2) k=normal(0,1) v=normal(0,1) sink=normal(0,1) seed=9",
       0x83108e79a3918f6eull},
      {"f16 b=3 hq=2 hkv=1 sq=7 sk=9 d=16 mask=causal-br pad=1 seqs=7:9,0:2,3:5+4 poison=inf q=normal(0,1) "
       "k=normal(0,1) v=normal(0,1) grad=1 dout=uniform(-1,1) seed=1",
       0xb2f1c8b008e6dfb5ull},
  };
  for (const Golden& golden : kGolden) {
    const HostInputs in = inputs_for(golden.line);
    EXPECT_EQ(in.hash(), golden.hash) << golden.line;
  }
}

TEST(Inputs, SequenceMemoryCountsTheIndexArrays) {
  // Q: 2 packed rows; K, V: 1002 pages of one key (1000 + 1 + the spare); decoded copies [2, 1, 1000, 1]; index
  // arrays: cu_seqlens_q and seqused_k (cu_seqlens_k counted too, as the bound for the unpaged layout), the
  // [2, 1000] table, the shuffle's 1002 entries, and the two int64 length arrays.
  Case c;
  ASSERT_TRUE(parse_case("f32 b=2 hq=1 hkv=1 sq=1 sk=1000 d=1 mask=none seqs=1:1000,1:1 page=1 seed=0", &c).ok());
  constexpr int64_t kEncoded = (2 + 2 * 1002) * 4;
  constexpr int64_t kDecoded = (2 + 2 * 2000) * 8;
  constexpr int64_t kIndex = (3 * 2 + 2 + 2 * 1000 + 1002) * 4 + 2 * 2 * 8;
  HostInputs in;
  const Status over = make_inputs(c, &in, kEncoded + kDecoded + kIndex - 1);
  EXPECT_NE(over.message().find("need " + std::to_string(kEncoded + kDecoded + kIndex) + " bytes"), std::string::npos)
      << over.message();
  EXPECT_TRUE(make_inputs(c, &in, kEncoded + kDecoded + kIndex).ok());
  // The new fields are validated, naming their keys.
  c = Case{};
  c.page = 4;
  EXPECT_NE(make_inputs(c, &in).message().find("page=4: paged K/V needs seqs"), std::string::npos);
  c = Case{};
  c.seqs = {{1, 2, 0}};
  EXPECT_NE(make_inputs(c, &in).message().find("sk=1 but the largest k + extra of seqs is 2"), std::string::npos);
}

TEST(Inputs, SameLineSameBytesDifferentSeedDifferentBytes) {
  const std::string line = "bf16 b=1 hq=2 hkv=2 sq=16 sk=16 d=32 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=";
  const HostInputs a = inputs_for(line + "1"), b = inputs_for(line + "1"), c = inputs_for(line + "2");
  EXPECT_EQ(a.q, b.q);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_NE(a.q, c.q);
  // Streams are per tensor: q and k with the same distribution differ.
  EXPECT_NE(a.q, a.k);
}

TEST(Inputs, NormalAndUniformHaveTheirMoments) {
  const HostInputs in =
      inputs_for("f32 b=1 hq=4 hkv=4 sq=128 sk=128 d=128 mask=none q=normal(2,3) k=uniform(-1,5) v=normal(0,1) seed=4");
  auto moments = [](const std::vector<double>& x, double* mean, double* sd) {
    double sum = 0, sum2 = 0;
    for (double e : x) sum += e;
    *mean = sum / static_cast<double>(x.size());
    for (double e : x) sum2 += (e - *mean) * (e - *mean);
    *sd = std::sqrt(sum2 / static_cast<double>(x.size()));
  };
  double mean, sd;
  moments(in.q_exact, &mean, &sd);  // 65536 samples: standard error of the mean 3/256
  EXPECT_NEAR(mean, 2.0, 0.05);
  EXPECT_NEAR(sd, 3.0, 0.05);
  moments(in.k_exact, &mean, &sd);
  EXPECT_NEAR(mean, 2.0, 0.03);
  EXPECT_NEAR(sd, 6.0 / std::sqrt(12.0), 0.02);
  EXPECT_GE(*std::min_element(in.k_exact.begin(), in.k_exact.end()), -1.0);
  EXPECT_LT(*std::max_element(in.k_exact.begin(), in.k_exact.end()), 5.0);
  // Box-Muller tails: a standard normal over 65536 samples reaches beyond 3.5 sigma but stays below 8.6.
  const auto [lo, hi] = std::minmax_element(in.v_exact.begin(), in.v_exact.end());
  EXPECT_LT(*lo, -3.5);
  EXPECT_GT(*hi, 3.5);
  EXPECT_LT(std::max(-*lo, *hi), 8.6);
}

TEST(Inputs, SpecialDistributionsAreWhatTheySay) {
  for (const char* dtype : {"f32", "f16", "bf16"}) {
    const HostInputs in = inputs_for(std::string(dtype) +
                                     " b=2 hq=2 hkv=2 sq=20 sk=20 d=16 mask=none q=nearmax(0.5) k=subnormal() "
                                     "v=negzero() seed=6");
    const DType dt = in.params.dtype;
    const double max = dtype_max(dt);
    const double min_normal = dt == DType::kF16 ? std::ldexp(1.0, -14) : std::ldexp(1.0, -126);
    bool positive = false, negative = false;
    for (double x : in.q_exact) {
      // 0.5 * max * (1 - u/8), u in [0,1), then one rounding.
      EXPECT_GE(std::fabs(x), round_to_dtype(dt, 0.5 * max * 7 / 8)) << dtype;
      EXPECT_LE(std::fabs(x), round_to_dtype(dt, 0.5 * max)) << dtype;
      (x > 0 ? positive : negative) = true;
    }
    EXPECT_TRUE(positive && negative) << dtype;
    for (double x : in.k_exact) {
      EXPECT_NE(x, 0.0) << dtype;
      EXPECT_LT(std::fabs(x), min_normal) << dtype;
    }
    for (double x : in.v_exact) {
      EXPECT_EQ(x, 0.0);
      EXPECT_TRUE(std::signbit(x));
    }
  }
}

TEST(Inputs, ConstRampAndDominant) {
  const HostInputs in = inputs_for(
      "f32 b=2 hq=3 hkv=3 sq=50 sk=40 d=8 mask=none q=const(0.1) k=ramp(-1,3) v=dominant(1,1000) seed=9");
  for (double x : in.q_exact) EXPECT_EQ(x, static_cast<double>(0.1f));
  // Ramp along the key axis: row means increase from about lo to about hi.
  const int64_t sk = 40, d = 8;
  for (int64_t bh = 0; bh < 6; ++bh) {
    double previous = -1e300;
    for (int64_t s = 0; s < sk; ++s) {
      double mean = 0;
      for (int64_t j = 0; j < d; ++j) mean += in.k_exact[static_cast<size_t>((bh * sk + s) * d + j)] / d;
      EXPECT_GT(mean, previous);
      previous = mean;
      EXPECT_NEAR(mean, -1.0 + 4.0 * static_cast<double>(s) / (sk - 1), 4.0 * 0x1p-13);
    }
  }
  // Dominant: exactly one row per (b, h) has a norm far above the others (sigma 1000 vs 1).
  for (int64_t bh = 0; bh < 6; ++bh) {
    int big_rows = 0;
    for (int64_t s = 0; s < sk; ++s) {
      double norm2 = 0;
      for (int64_t j = 0; j < d; ++j) norm2 += std::pow(in.v_exact[static_cast<size_t>((bh * sk + s) * d + j)], 2);
      big_rows += norm2 > 1e4 ? 1 : 0;
    }
    EXPECT_EQ(big_rows, 1) << "(b,h) " << bh;
  }
}

TEST(Inputs, LayoutsPaddingAndParams) {
  for (const char* layout : {"", " layout=bshd"}) {
    const std::string line = std::string("bf16 b=2 hq=4 hkv=2 sq=5 sk=7 d=6 mask=causal-br") + layout +
                             " pad=3 q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=10";
    const HostInputs in = inputs_for(line);
    const Params& p = in.params;
    EXPECT_EQ(p.softmax_scale, static_cast<float>(1.0 / std::sqrt(6.0)));
    EXPECT_EQ(p.mask, Mask::kCausalBottomRight);
    EXPECT_EQ(p.q, in.q.data());
    EXPECT_EQ(in.q.size(), size_t{2 * 4 * 5 * 9 * 2});
    EXPECT_EQ(in.k.size(), size_t{2 * 2 * 7 * 9 * 2});
    const bool bshd = *layout != '\0';
    EXPECT_EQ(p.q_stride.head, bshd ? 9 : 5 * 9);
    EXPECT_EQ(p.q_stride.row, bshd ? 4 * 9 : 9);
    EXPECT_EQ(p.o_stride.row, p.q_stride.row);
    // Every element sits where the strides say; every other slot holds the NaN padding pattern.
    std::vector<bool> is_element(in.k.size() / 2, false);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t s = 0; s < 7; ++s)
          for (int64_t d = 0; d < 6; ++d) {
            const int64_t offset = b * p.k_stride.batch + h * p.k_stride.head + s * p.k_stride.row + d;
            is_element[static_cast<size_t>(offset)] = true;
            const double exact = in.k_exact[static_cast<size_t>(((b * 2 + h) * 7 + s) * 6 + d)];
            EXPECT_EQ(decode_bf16(static_cast<uint16_t>(element_bits(in, in.k, offset))), exact);
          }
    for (size_t i = 0; i < is_element.size(); ++i) {
      if (!is_element[i]) {
        EXPECT_EQ(element_bits(in, in.k, static_cast<int64_t>(i)), kInputPadBits16) << i;
      }
    }
    const oracle::Problem problem = in.problem();
    EXPECT_EQ(problem.heads_kv, 2);
    EXPECT_EQ(problem.scale, static_cast<double>(p.softmax_scale));
    EXPECT_EQ(problem.k.size(), in.k_exact.size());
  }
}

TEST(Inputs, InjectionsOverrideGeneratedValues) {
  const HostInputs in = inputs_for(
      "f16 b=1 hq=1 hkv=1 sq=4 sk=4 d=8 mask=none layout=bshd pad=2 q=normal(0,1) k=normal(0,1) v=normal(0,1) "
      "inject=q[0,0,1,3]:nan;k[0,0,2,0]:-inf;v[0,0,0,0]:1000000;v[0,0,1,1]:-0;v[0,0,3,7]:0.1 seed=12");
  EXPECT_TRUE(std::isnan(in.q_exact[1 * 8 + 3]));
  EXPECT_EQ(in.k_exact[2 * 8 + 0], -std::numeric_limits<double>::infinity());
  EXPECT_EQ(in.v_exact[0], std::numeric_limits<double>::infinity());  // beyond f16's range
  EXPECT_EQ(in.v_exact[1 * 8 + 1], 0.0);
  EXPECT_TRUE(std::signbit(in.v_exact[1 * 8 + 1]));
  EXPECT_EQ(in.v_exact[3 * 8 + 7], round_to_dtype(DType::kF16, 0.1));
  const int64_t q_offset = 1 * in.params.q_stride.row + 3;
  EXPECT_EQ(element_bits(in, in.q, q_offset), 0x7E00u);  // canonical quiet NaN, not the padding pattern
}

TEST(Inputs, SinkIsOneFp32ValuePerQueryHeadOnAStreamOfItsOwn) {
  const std::string line = "bf16 b=2 hq=64 hkv=8 sq=5 sk=6 d=8 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1)";
  const HostInputs plain = inputs_for(line + " seed=3");
  const HostInputs with_sink = inputs_for(line + " sink=normal(2,3) seed=3");
  EXPECT_TRUE(plain.sink.empty() && plain.sink_exact.empty());
  EXPECT_EQ(plain.params.sink, nullptr);
  // Q, K, V are the same bytes with or without a sink; the hash covers the sink too.
  EXPECT_EQ(plain.q, with_sink.q);
  EXPECT_EQ(plain.k, with_sink.k);
  EXPECT_EQ(plain.v, with_sink.v);
  EXPECT_NE(plain.hash(), with_sink.hash());
  ASSERT_EQ(with_sink.sink.size(), size_t{64});
  ASSERT_EQ(with_sink.sink_exact.size(), size_t{64});
  EXPECT_EQ(with_sink.params.sink, with_sink.sink.data());
  double mean = 0.0;
  for (size_t h = 0; h < 64; ++h) {
    EXPECT_EQ(static_cast<double>(with_sink.sink[h]), with_sink.sink_exact[h]);  // fp32 values
    mean += with_sink.sink_exact[h] / 64;
  }
  EXPECT_NEAR(mean, 2.0, 1.5);  // 64 draws of normal(2, 3): standard error 3/8
  EXPECT_NE(with_sink.sink_exact[0], with_sink.sink_exact[1]);
  EXPECT_EQ(with_sink.problem().sink.size(), size_t{64});
  // The same distribution as q's, not the same values: the sink has a stream of its own.
  const HostInputs q_like = inputs_for("f32 b=1 hq=64 hkv=1 sq=1 sk=1 d=1 mask=none q=normal(2,3) sink=normal(2,3) seed=3");
  EXPECT_NE(q_like.q_exact[0], q_like.sink_exact[0]);
  // A copy rebinds to its own sink.
  HostInputs copy = with_sink;
  copy.bind();
  EXPECT_EQ(copy.params.sink, copy.sink.data());
}

TEST(Inputs, SinkDistributionsAreFp32s) {
  const std::string shape = "f16 b=1 hq=16 hkv=1 sq=2 sk=2 d=4 mask=none seed=5 sink=";
  const HostInputs minus_inf = inputs_for(shape + "const(-inf)");
  for (double x : minus_inf.sink_exact) EXPECT_EQ(x, -std::numeric_limits<double>::infinity());
  // nearmax and subnormal are fp32's: beyond f16's range, below f16's subnormals.
  const HostInputs near_max = inputs_for(shape + "nearmax(1)");
  for (double x : near_max.sink_exact) {
    EXPECT_GT(std::fabs(x), 1e38);
    EXPECT_TRUE(std::isfinite(x));
  }
  const HostInputs tiny = inputs_for(shape + "subnormal()");
  for (double x : tiny.sink_exact) {
    EXPECT_NE(x, 0.0);
    EXPECT_LT(std::fabs(x), 0x1p-126);
  }
  // A ramp runs along the heads; dominant picks one head.
  const HostInputs ramp = inputs_for(shape + "ramp(-30,30)");
  for (size_t h = 1; h < 16; ++h) EXPECT_GT(ramp.sink_exact[h], ramp.sink_exact[h - 1]);
  EXPECT_NEAR(ramp.sink_exact[0], -30.0, 0.01);
  EXPECT_NEAR(ramp.sink_exact[15], 30.0, 0.01);
  const HostInputs dominant = inputs_for(shape + "dominant(1,1000)");
  int big = 0;
  for (double x : dominant.sink_exact) big += std::fabs(x) > 50.0 ? 1 : 0;
  EXPECT_EQ(big, 1);
  // 0.1 as fp32, not as f16.
  EXPECT_EQ(inputs_for(shape + "const(0.1)").sink_exact[3], static_cast<double>(0.1f));
}

// ---- dO, the upstream gradient of a grad case.

// Where element [b, h, s, d] of O (and dO) lies: the test's own reading of case.h's layouts, dense or packed.
int64_t o_offset(const HostInputs& in, int64_t b, int64_t h, int64_t s, int64_t d) {
  const Strides& st = in.params.o_stride;
  if (in.cu_seqlens_q.empty()) return b * st.batch + h * st.head + s * st.row + d;
  return (in.cu_seqlens_q[static_cast<size_t>(b)] + s) * st.row + h * st.head + d;
}

// dO is laid out exactly like O (its strides, its o_padded elements, packed like O with sequences), every element
// where o_stride puts it and equal to its decoded copy, rows past a sequence's q are 0 in the copy, and every other
// slot holds the case's poison, as the inputs' padding does. The same line gives the same bytes.
TEST(Inputs, DOutIsLaidOutLikeO) {
  const std::string shape = "f16 b=3 hq=4 hkv=2 sq=9 sk=12 d=8 dv=6 mask=none";
  const std::string rest = " q=normal(0,1) k=normal(0,1) v=normal(0,1) grad=1 dout=normal(0,2) seed=21";
  const HostInputs dense = inputs_for(shape + rest);
  const int64_t dense_q_len[3] = {9, 9, 9}, seq_q_len[3] = {9, 0, 5};
  for (const std::string layout : {"", " layout=bshd pad=3", " pad=1 seqs=9:5+7,0:0,5:12",
                                   " layout=bshd pad=2 seqs=9:5+7,0:0,5:12 page=3 poison=inf",
                                   " seqs=9:5+7,0:0,5:12 poison=zero"}) {
    const std::string line = shape + layout + rest;
    const HostInputs in = inputs_for(line);
    const DType dt = in.params.dtype;
    const int64_t esize = dtype_size(dt);
    const bool has_seqs = !in.cu_seqlens_q.empty();
    const int64_t* q_len = has_seqs ? seq_q_len : dense_q_len;
    ASSERT_EQ(static_cast<int64_t>(in.d_o.size()), in.o_padded * esize) << line;
    ASSERT_EQ(static_cast<int64_t>(in.d_o_exact.size()), in.o_elements) << line;
    ASSERT_EQ(in.o_elements, 3 * 4 * 9 * 6) << line;
    const Poison poison = line.find("poison=inf") != std::string::npos    ? Poison::kInf
                          : line.find("poison=zero") != std::string::npos ? Poison::kZero
                                                                           : Poison::kNaN;
    const uint32_t want_poison = poison == Poison::kNaN ? kInputPadBits16
                                 : poison == Poison::kInf ? encode_dtype(dt, std::numeric_limits<double>::infinity())
                                                          : 0u;
    std::vector<bool> is_element(in.d_o.size() / static_cast<size_t>(esize), false);
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t h = 0; h < 4; ++h)
        for (int64_t s = 0; s < 9; ++s)
          for (int64_t d = 0; d < 6; ++d) {
            const size_t index = static_cast<size_t>(((b * 4 + h) * 9 + s) * 6 + d);
            if (s >= q_len[b]) {
              ASSERT_EQ(double_bits(in.d_o_exact[index]), double_bits(0.0)) << line;
              continue;
            }
            const int64_t offset = o_offset(in, b, h, s, d);
            ASSERT_FALSE(is_element[static_cast<size_t>(offset)]) << line << ": two elements at " << offset;
            is_element[static_cast<size_t>(offset)] = true;
            const uint32_t bits = element_bits(in, in.d_o, offset);
            ASSERT_EQ(double_bits(decode_dtype(dt, bits)), double_bits(in.d_o_exact[index]))
                << line << " [" << b << "," << h << "," << s << "," << d << "]";
            // A case with sequences holds the dense case's dO inside its sequences (the values do not depend on
            // the layout).
            ASSERT_EQ(double_bits(in.d_o_exact[index]), double_bits(dense.d_o_exact[index])) << line;
          }
    int64_t data = 0;
    for (size_t i = 0; i < is_element.size(); ++i) {
      if (is_element[i]) {
        ++data;
        continue;
      }
      ASSERT_EQ(element_bits(in, in.d_o, static_cast<int64_t>(i)), want_poison) << line << ": dO element " << i;
    }
    EXPECT_EQ(data, (has_seqs ? 9 + 0 + 5 : 27) * 4 * 6) << line;
    // Deterministic: the same line, the same dO.
    const HostInputs again = inputs_for(line);
    EXPECT_EQ(again.d_o, in.d_o) << line;
    EXPECT_EQ(again.d_o_exact, in.d_o_exact) << line;
  }
}

// Without grad nothing of dO exists; with it dO changes nothing else: Q, K, V, the sink and the index arrays are the
// same bytes whatever dO's distribution, and the hash is the forward case's continued over dO's bytes.
TEST(Inputs, DOutLeavesTheForwardInputsAlone) {
  const std::string line = "bf16 b=2 hq=4 hkv=2 sq=17 sk=19 d=16 mask=causal-br layout=bshd pad=2 q=normal(0,1) "
                           "k=normal(0,1) v=normal(0,1) sink=normal(0,1)";
  const HostInputs forward = inputs_for(line + " seed=8");
  EXPECT_TRUE(forward.d_o.empty() && forward.d_o_exact.empty());
  for (const char* dout : {" grad=1", " grad=1 dout=uniform(-5,5)", " grad=1 dout=dominant(1,100)"}) {
    const HostInputs grad = inputs_for(line + dout + " seed=8");
    EXPECT_EQ(grad.q, forward.q) << dout;
    EXPECT_EQ(grad.k, forward.k) << dout;
    EXPECT_EQ(grad.v, forward.v) << dout;
    EXPECT_EQ(grad.q_exact, forward.q_exact) << dout;
    EXPECT_EQ(grad.sink, forward.sink) << dout;
    EXPECT_FALSE(grad.d_o.empty()) << dout;
    EXPECT_EQ(grad.hash(), fnv1a64(grad.d_o.data(), grad.d_o.size(), forward.hash())) << dout;
  }
  // Injections name q, k or v: they never touch dO.
  const std::string small = "f32 b=1 hq=2 hkv=1 sq=4 sk=4 d=8 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) "
                            "grad=1 dout=normal(0,1)";
  const HostInputs plain = inputs_for(small + " seed=2");
  const HostInputs injected = inputs_for(small + " inject=q[0,1,3,7]:nan;v[0,0,0,0]:inf seed=2");
  EXPECT_EQ(injected.d_o, plain.d_o);
  EXPECT_NE(injected.q, plain.q);
  // dO has a stream of its own: the same distribution and shape as Q (d = dv, hq) draws other values.
  EXPECT_EQ(plain.d_o_exact.size(), plain.q_exact.size());
  EXPECT_NE(plain.d_o_exact, plain.q_exact);
}

// dout's distributions are q's: the moments of normal, a ramp along the query rows, one dominant query row per
// (b, h), the dtype's rounding.
TEST(Inputs, DOutDistributions) {
  const std::string shape = "f32 b=2 hq=3 hkv=1 sq=64 sk=4 d=4 dv=32 mask=none grad=1 seed=5 dout=";
  const HostInputs normal = inputs_for(shape + "normal(1,2)");
  double sum = 0.0;
  for (double x : normal.d_o_exact) sum += x;
  EXPECT_NEAR(sum / static_cast<double>(normal.d_o_exact.size()), 1.0, 0.15);  // 12288 draws: standard error 0.018
  const HostInputs ramp = inputs_for(shape + "ramp(-1,1)");
  EXPECT_NEAR(ramp.d_o_exact[0], -1.0, 0.01);
  EXPECT_NEAR(ramp.d_o_exact[63 * 32], 1.0, 0.01);
  const HostInputs dominant = inputs_for(shape + "dominant(1,1000)");
  for (int64_t bh = 0; bh < 6; ++bh) {
    int big_rows = 0;
    for (int64_t s = 0; s < 64; ++s) {
      double norm2 = 0.0;
      for (int64_t d = 0; d < 32; ++d) norm2 += std::pow(dominant.d_o_exact[static_cast<size_t>((bh * 64 + s) * 32 + d)], 2);
      big_rows += norm2 > 1e4 ? 1 : 0;
    }
    EXPECT_EQ(big_rows, 1) << "(b,h) " << bh;
  }
  // Rounded to the case's dtype: 0.1 as f16.
  const HostInputs f16 = inputs_for("f16 d=4 grad=1 dout=const(0.1) seed=0");
  for (double x : f16.d_o_exact) EXPECT_EQ(x, round_to_dtype(DType::kF16, 0.1));
}

// host_inputs_bytes counts dO's encoded buffer (O's o_padded elements) and its decoded copy; make_inputs holds to it.
TEST(Inputs, DOutCountsAgainstTheMemoryLimit) {
  for (const char* layout : {" pad=3", " pad=1 seqs=9:5+7,0:0,5:12"}) {
    const std::string shape = std::string("bf16 b=3 hq=4 hkv=2 sq=9 sk=12 d=8 dv=6 mask=none") + layout;
    Case forward, grad;
    ASSERT_TRUE(parse_case(shape + " seed=1", &forward).ok());
    ASSERT_TRUE(parse_case(shape + " grad=1 seed=1", &grad).ok());
    HostInputs in;
    ASSERT_TRUE(make_inputs(grad, &in).ok());
    const int64_t d_o_bytes = in.o_padded * 2 + in.o_elements * 8;
    EXPECT_EQ(static_cast<int64_t>(in.d_o.size() + in.d_o_exact.size() * sizeof(double)), d_o_bytes) << layout;
    EXPECT_EQ(host_inputs_bytes(grad), host_inputs_bytes(forward) + d_o_bytes) << layout;
    EXPECT_NE(make_inputs(grad, &in, host_inputs_bytes(grad) - 1).message().find("host memory"), std::string::npos);
    EXPECT_TRUE(make_inputs(grad, &in, host_inputs_bytes(grad)).ok()) << layout;
  }
}

TEST(Inputs, EmptyShapesAndMemoryLimit) {
  const HostInputs in = inputs_for("f16 b=0 hq=4 hkv=4 sq=8 sk=8 d=64 mask=none seed=1");
  EXPECT_TRUE(in.q.empty() && in.k_exact.empty());
  EXPECT_EQ(in.params.q, nullptr);
  Case c;
  ASSERT_TRUE(parse_case("f32 b=1000 hq=1000 hkv=1000 sq=1000 sk=1000 d=256 seed=0", &c).ok());
  HostInputs big;
  Status status = make_inputs(c, &big);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("host memory"), std::string::npos) << status.message();
  ASSERT_TRUE(parse_case("f32 b=9223372036854775807 hq=2 sq=2 sk=2 d=2 seed=0", &c).ok());
  status = make_inputs(c, &big);
  EXPECT_NE(status.message().find("more than 2^63 bytes"), std::string::npos) << status.message();
  // The sink counts against the budget even where batch 0 makes Q, K, V empty.
  ASSERT_TRUE(parse_case("f32 b=0 hq=4611686018427387904 hkv=1 sq=2 sk=2 d=2 sink=normal(0,1) seed=0", &c).ok());
  status = make_inputs(c, &big);
  EXPECT_NE(status.message().find("host memory"), std::string::npos) << status.message();
  c = Case{};
  c.inject.push_back({'k', 0, 0, 1, 0, 1.0});  // sk = 1: row 1 is outside
  EXPECT_NE(make_inputs(c, &big).message().find("row index 1 outside sk=1"), std::string::npos);
}

}  // namespace
}  // namespace flashcheck
