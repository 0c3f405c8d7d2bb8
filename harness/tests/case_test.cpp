// Case codec: canonical lines round-trip byte for byte, random Cases round-trip through their line (windows,
// softcaps, sinks, grad and dout, sequences, pages, poison and splits included), hand-written lines canonicalise,
// case_params carries the window and softcap and lays out sequences, and every kind of malformed line is rejected
// with a message that names the token, its column and the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "flashcheck/case.h"
#include "flashcheck/inputs.h"

namespace flashcheck {
namespace {

const std::vector<std::string> kCanonicalLines = {
    "bf16 b=2 hq=8 hkv=2 sq=129 sk=257 d=128 mask=causal-br q=normal(0,3) k=normal(0,3) v=uniform(-1,1) seed=42",
    "f32 b=1 hq=1 hkv=1 sq=1 sk=1 d=1 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=0",
    "f16 b=0 hq=4 hkv=4 sq=0 sk=0 d=64 mask=causal-tl q=const(0.5) k=const(-0) v=const(nan) seed=18446744073709551615",
    ("f16 b=3 hq=6 hkv=3 sq=17 sk=31 d=80 mask=none layout=bshd pad=8 scale=0.1 q=nearmax(0.25) k=subnormal() "
    "v=negzero() seed=7"),
    "bf16 b=1 hq=2 hkv=1 sq=64 sk=65 d=256 mask=causal-br q=ramp(-2,2) k=ramp(3,-1.5) v=dominant(1,30) seed=123456789",
    ("f32 b=1 hq=1 hkv=1 sq=2 sk=3 d=4 mask=none scale=-0 q=uniform(-1e-30,1e+30) k=const(inf) v=const(-inf) "
    "inject=q[0,0,1,3]:nan;k[0,0,2,0]:-inf;v[0,0,0,0]:inf;v[0,0,1,1]:-0;q[0,0,0,0]:65504 seed=1"),
    ("f16 b=1 hq=1 hkv=1 sq=1 sk=1 d=1 mask=none scale=3.4028235e+38 q=normal(0.1,0.30000000000000004) "
    "k=normal(5e-324,1.7976931348623157e+308) v=uniform(-0,0) seed=5"),
    "bf16 b=1 hq=1 hkv=1 sq=5 sk=0 d=0 mask=none pad=1 q=dominant(0,0) k=nearmax(0) v=ramp(0,0) seed=9",
    ("bf16 b=1 hq=4 hkv=2 sq=100 sk=300 d=64 mask=window-br window=64,0 layout=bshd pad=2 scale=0.125 softcap=30 "
    "q=normal(0,3) k=normal(0,3) v=normal(0,1) sink=normal(0,2) seed=3"),
    "f32 b=1 hq=2 hkv=1 sq=7 sk=5 d=8 mask=window-tl window=-1,-1 q=normal(0,1) k=normal(0,1) v=normal(0,1) "
    "sink=const(-inf) seed=1",
    ("f16 b=2 hq=3 hkv=3 sq=9 sk=9 d=16 mask=window-tl window=0,9223372036854775807 softcap=0.5 q=normal(0,1) "
    "k=normal(0,1) v=normal(0,1) sink=const(nan) inject=k[1,2,8,15]:-inf seed=4"),
    "f16 b=1 hq=8 hkv=1 sq=3 sk=4 d=8 mask=none softcap=0.001 q=normal(0,1) k=normal(0,1) v=normal(0,1) "
    "sink=ramp(-100,100) seed=2",
    "f32 b=1 hq=2 hkv=2 sq=1 sk=1 d=1 mask=causal-br q=normal(0,1) k=normal(0,1) v=normal(0,1) sink=subnormal() seed=0",
    // Sequences, pages, poison and splits (the inference path).
    ("bf16 b=3 hq=4 hkv=2 sq=100 sk=19 d=64 mask=causal-br seqs=17:17,0:5+2,100:19 q=normal(0,3) k=normal(0,3) "
    "v=uniform(-1,1) seed=42"),
    ("f16 b=2 hq=2 hkv=1 sq=9 sk=40 d=16 mask=window-tl window=4,0 layout=bshd pad=2 seqs=9:33+7,1:0 page=16 "
    "poison=inf splits=3 scale=0.25 softcap=30 q=normal(0,1) k=normal(0,1) v=normal(0,1) sink=normal(0,1) "
    "inject=k[0,0,32,15]:-inf;q[1,1,0,0]:nan seed=5"),
    "f32 b=1 hq=1 hkv=1 sq=5 sk=7 d=8 mask=none seqs=5:3+4 page=1 poison=zero q=normal(0,1) k=normal(0,1) "
    "v=normal(0,1) seed=0",
    "f32 b=1 hq=2 hkv=2 sq=64 sk=64 d=32 mask=causal-tl splits=0 q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=1",
    "f16 b=2 hq=2 hkv=2 sq=3 sk=3 d=8 mask=none layout=bshd splits=7 q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=1",
    // The backward pass: grad=1 and dO's distribution, always written, after the sink and before the injections.
    ("bf16 b=2 hq=8 hkv=2 sq=129 sk=257 d=128 mask=causal-br q=normal(0,3) k=normal(0,3) v=uniform(-1,1) grad=1 "
    "dout=normal(0,1) seed=42"),
    ("f16 b=2 hq=2 hkv=1 sq=9 sk=40 d=16 dv=8 mask=window-tl window=4,0 layout=bshd pad=2 seqs=9:33+7,1:0 page=16 "
    "poison=inf splits=3 scale=0.25 softcap=30 q=normal(0,1) k=normal(0,1) v=normal(0,1) sink=normal(0,1) grad=1 "
    "dout=dominant(0.5,20) inject=k[0,0,32,15]:-inf;q[1,1,0,0]:nan property=SequencesAgreeWithOracle seed=5"),
    "f32 b=1 hq=1 hkv=1 sq=1 sk=1 d=1 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) grad=1 dout=const(-0) seed=0",
    // Dropout: the probability, then its seed and offset, always written with it, after the softcap.
    ("bf16 b=2 hq=4 hkv=2 sq=33 sk=65 d=64 mask=causal-br softcap=30 dropout=0.1 drop_seed=18446744073709551615 "
    "drop_offset=4294967295 q=normal(0,1) k=normal(0,1) v=normal(0,1) grad=1 dout=normal(0,1) seed=8"),
    ("f32 b=1 hq=1 hkv=1 sq=3 sk=3 d=4 mask=none dropout=0.99999994 drop_seed=0 drop_offset=0 q=normal(0,1) "
    "k=normal(0,1) v=normal(0,1) seed=0"),
};

TEST(CaseCodec, CanonicalLinesRoundTrip) {
  for (const std::string& line : kCanonicalLines) {
    Case c;
    const Status status = parse_case(line, &c);
    ASSERT_TRUE(status.ok()) << line << "\n" << status.message();
    EXPECT_EQ(format_case(c), line);
    Case again;
    ASSERT_TRUE(parse_case(format_case(c), &again).ok());
    EXPECT_EQ(again, c) << line;
  }
}

TEST(CaseCodec, EveryDistributionAppearsInTheRoundTripLines) {
  std::vector<bool> seen(kDistKindCount, false);
  for (const std::string& line : kCanonicalLines) {
    Case c;
    ASSERT_TRUE(parse_case(line, &c).ok());
    for (const ValueSpec* spec : {&c.q, &c.k, &c.v}) seen[static_cast<size_t>(spec->kind)] = true;
  }
  for (int kind = 0; kind < kDistKindCount; ++kind) EXPECT_TRUE(seen[kind]) << to_string(static_cast<DistKind>(kind));
}

// Random Cases (random doubles from random bit patterns, so shortest-repr printing is exercised on
// arbitrary values) survive format -> parse exactly.
TEST(CaseCodec, RandomCasesRoundTrip) {
  constexpr int kCases = 2000;
  uint32_t key[2] = {0x5eed, 0};
  int64_t counter = 0;
  auto next = [&]() {
    const uint32_t ctr[4] = {static_cast<uint32_t>(counter++), 0, 0, 0};
    uint32_t out[4];
    Philox4x32::generate(ctr, key, out);
    return uint64_t{out[0]} << 32 | out[1];
  };
  auto finite_double = [&]() {
    double x;
    do {
      x = std::bit_cast<double>(next());
    } while (!std::isfinite(x));
    return x;
  };
  for (int n = 0; n < kCases; ++n) {
    Case c;
    c.dtype = static_cast<DType>(next() % 3);
    c.batch = static_cast<int64_t>(next() % 4);
    c.heads_kv = 1 + static_cast<int64_t>(next() % 3);
    c.heads_q = c.heads_kv * (1 + static_cast<int64_t>(next() % 3));
    c.seqlen_q = static_cast<int64_t>(next() % 300);
    c.seqlen_k = static_cast<int64_t>(next() >> 1);  // any non-negative int64
    c.head_dim = static_cast<int64_t>(next() % 257);
    c.mask = static_cast<Mask>(next() % 5);
    if (c.mask == Mask::kWindowBottomRight || c.mask == Mask::kWindowTopLeft) {
      // -1, small, or any non-negative int64
      for (int64_t* side : {&c.window_left, &c.window_right}) {
        const uint64_t pick = next() % 3;
        *side = pick == 0 ? -1 : pick == 1 ? static_cast<int64_t>(next() % 300) : static_cast<int64_t>(next() >> 1);
      }
    }
    if (next() % 2) c.softcap = std::fabs(std::bit_cast<float>(static_cast<uint32_t>(next()) & 0x7F7FFFFFu));
    c.layout = static_cast<Layout>(next() % 2);
    c.pad = static_cast<int64_t>(next() % 3);
    if (next() % 2) c.scale = std::bit_cast<float>(static_cast<uint32_t>(next()) & 0x7F7FFFFFu);  // finite
    if (next() % 2) c.sink.emplace();
    if (next() % 3 == 0) {
      c.dropout = static_cast<float>(next() % (1u << 24)) * 0x1p-24f;  // [0, 1): every fp32 step of 2^-24
      if (c.dropout != 0.0f) {
        c.drop_seed = next();
        c.drop_offset = next();
      }
    }
    c.grad = next() % 2 != 0;
    for (ValueSpec* spec : {&c.q, &c.k, &c.v, c.sink ? &*c.sink : nullptr, c.grad ? &c.dout : nullptr}) {
      if (spec == nullptr) continue;
      spec->kind = static_cast<DistKind>(next() % kDistKindCount);
      const double x = std::fabs(finite_double()) * 0x1p-2, y = std::fabs(finite_double()) * 0x1p-2;
      switch (spec->kind) {
        case DistKind::kUniform:
          spec->a = -x;
          spec->b = y;
          break;
        case DistKind::kConst:
          spec->a = finite_double();
          break;
        case DistKind::kNearMax:
          spec->a = x;
          break;
        case DistKind::kSubnormal:
        case DistKind::kNegZero:
          break;
        default:  // normal, ramp, dominant: a any sign for ramp/normal, b >= 0
          spec->a = spec->kind == DistKind::kDominant ? x : finite_double() * 0x1p-2;
          spec->b = y;
          break;
      }
    }
    if (c.batch > 0 && c.seqlen_q > 0 && c.head_dim > 0 && next() % 2) {
      c.inject.push_back({'q', static_cast<int64_t>(next() % c.batch), static_cast<int64_t>(next() % c.heads_q),
                          static_cast<int64_t>(next() % c.seqlen_q), static_cast<int64_t>(next() % c.head_dim),
                          finite_double()});
      c.inject.push_back({'k', 0, c.heads_kv - 1, 0, 0, -std::numeric_limits<double>::infinity()});
      if (c.seqlen_k == 0) c.inject.pop_back();
    }
    c.seed = next();
    ASSERT_TRUE(validate_case(c).ok()) << validate_case(c).message();
    const std::string line = format_case(c);
    Case parsed;
    const Status status = parse_case(line, &parsed);
    ASSERT_TRUE(status.ok()) << line << "\n" << status.message();
    EXPECT_EQ(parsed, c) << line;
    EXPECT_EQ(format_case(parsed), line);
  }
}

TEST(CaseCodec, HandWrittenLinesCanonicalise) {
  Case c;
  ASSERT_TRUE(parse_case("  f16\tseed=3 d=64 sq=10 sk=12 hq=4   mask=causal-tl\r\n", &c).ok());
  // Missing keys take Case defaults; hkv follows hq.
  EXPECT_EQ(format_case(c),
            "f16 b=1 hq=4 hkv=4 sq=10 sk=12 d=64 mask=causal-tl q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=3");
  ASSERT_TRUE(parse_case("f32 layout=bhsd pad=0 q=uniform(-1.50,2e0) inject=v[0,0,0,0]:-NaN seed=0", &c).ok());
  EXPECT_EQ(format_case(c),
            "f32 b=1 hq=1 hkv=1 sq=1 sk=1 d=1 mask=none q=uniform(-1.5,2) k=normal(0,1) v=normal(0,1) "
            "inject=v[0,0,0,0]:nan seed=0");
}

TEST(CaseCodec, WindowSoftcapAndSinkCanonicalise) {
  Case c;
  ASSERT_TRUE(parse_case("f16 sink=const(-INF) softcap=2.50 window=0128,-1 d=8 mask=window-tl seed=0", &c).ok());
  EXPECT_EQ(format_case(c),
            "f16 b=1 hq=1 hkv=1 sq=1 sk=1 d=8 mask=window-tl window=128,-1 softcap=2.5 q=normal(0,1) k=normal(0,1) "
            "v=normal(0,1) sink=const(-inf) seed=0");
  // softcap 0 (and -0) is off: the default, left out.
  ASSERT_TRUE(parse_case("f32 softcap=-0 seed=0", &c).ok());
  EXPECT_EQ(c.softcap, 0.0f);
  EXPECT_FALSE(std::signbit(c.softcap));
  EXPECT_EQ(format_case(c), "f32 b=1 hq=1 hkv=1 sq=1 sk=1 d=1 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=0");
}

// grad=1 brings dout= with it: the default normal(0,1) when the line leaves it out, written in the canonical line
// either way; grad=0 is the default, left out; the two keys come in any order.
TEST(CaseCodec, GradAndDoutCanonicalise) {
  Case c;
  ASSERT_TRUE(parse_case("f16 grad=1 d=8 seed=0", &c).ok());
  EXPECT_TRUE(c.grad);
  EXPECT_EQ(c.dout, (ValueSpec{DistKind::kNormal, 0.0, 1.0}));
  EXPECT_EQ(format_case(c), "f16 b=1 hq=1 hkv=1 sq=1 sk=1 d=8 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) "
                            "grad=1 dout=normal(0,1) seed=0");
  ASSERT_TRUE(parse_case("f16 inject=q[0,0,0,0]:1 dout=uniform(-2,2.50) sink=const(-INF) grad=1 seed=0", &c).ok());
  EXPECT_EQ(c.dout, (ValueSpec{DistKind::kUniform, -2.0, 2.5}));
  EXPECT_EQ(format_case(c), "f16 b=1 hq=1 hkv=1 sq=1 sk=1 d=1 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) "
                            "sink=const(-inf) grad=1 dout=uniform(-2,2.5) inject=q[0,0,0,0]:1 seed=0");
  // grad=0 is forward only: the same Case as a line without it.
  Case forward, plain;
  ASSERT_TRUE(parse_case("f32 grad=0 seed=3", &forward).ok());
  ASSERT_TRUE(parse_case("f32 seed=3", &plain).ok());
  EXPECT_FALSE(forward.grad);
  EXPECT_EQ(forward, plain);
  EXPECT_EQ(format_case(forward), "f32 b=1 hq=1 hkv=1 sq=1 sk=1 d=1 mask=none q=normal(0,1) k=normal(0,1) "
                                  "v=normal(0,1) seed=3");
  // grad and dout take part in equality.
  Case grad = plain;
  grad.grad = true;
  EXPECT_NE(grad, plain);
  Case other_dout = grad;
  other_dout.dout = ValueSpec{DistKind::kNormal, 0.0, 2.0};
  EXPECT_NE(other_dout, grad);
}

TEST(CaseCodec, DropoutCanonicalisesAndReachesParams) {
  Case c;
  ASSERT_TRUE(parse_case("f16 drop_offset=12 dropout=0.250 d=8 seed=0", &c).ok());
  EXPECT_EQ(c.dropout, 0.25f);
  EXPECT_EQ(c.drop_seed, 0u);
  EXPECT_EQ(c.drop_offset, 12u);
  EXPECT_EQ(format_case(c), "f16 b=1 hq=1 hkv=1 sq=1 sk=1 d=8 mask=none dropout=0.25 drop_seed=0 drop_offset=12 "
                            "q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=0");
  const Params p = case_params(c);
  EXPECT_EQ(p.dropout_p, 0.25f);
  EXPECT_EQ(p.dropout_seed, 0u);
  EXPECT_EQ(p.dropout_offset, 12u);
  EXPECT_EQ(p.dropout_mask_out, nullptr);
  // dropout=0 (or -0) is no dropout: the same Case as a line without it.
  Case off, plain;
  ASSERT_TRUE(parse_case("f32 dropout=-0 seed=3", &off).ok());
  ASSERT_TRUE(parse_case("f32 seed=3", &plain).ok());
  EXPECT_EQ(off, plain);
  EXPECT_EQ(format_case(off), format_case(plain));
  // The three take part in equality.
  Case a = c, b = c;
  b.drop_seed = 1;
  EXPECT_NE(a, b);
  b = c;
  b.drop_offset = 13;
  EXPECT_NE(a, b);
  // validate_case holds a programmatic Case to the parser's rules, naming the key.
  Case bad = plain;
  bad.drop_seed = 5;
  EXPECT_NE(validate_case(bad).message().find("drop_seed"), std::string::npos);
  bad = plain;
  bad.dropout = 1.0f;
  EXPECT_NE(validate_case(bad).message().find("dropout must be in [0, 1)"), std::string::npos);
  bad.dropout = std::nanf("");
  EXPECT_EQ(validate_case(bad).code(), StatusCode::kInvalidArgument);
}

TEST(CaseCodec, CaseParamsCarryWindowAndSoftcap) {
  Case c;
  ASSERT_TRUE(parse_case("bf16 hq=4 hkv=2 sq=9 sk=12 d=16 mask=window-br window=3,0 softcap=20 sink=normal(0,1) seed=0", &c)
                  .ok());
  const Params p = case_params(c);
  EXPECT_EQ(p.mask, Mask::kWindowBottomRight);
  EXPECT_EQ(p.window_left, 3);
  EXPECT_EQ(p.window_right, 0);
  EXPECT_EQ(p.softcap, 20.0f);
  EXPECT_EQ(p.sink, nullptr);  // the values live in HostInputs
  ASSERT_TRUE(parse_case("bf16 hq=4 hkv=2 sq=9 sk=12 d=16 mask=causal-tl seed=0", &c).ok());
  EXPECT_EQ(case_params(c).window_left, -1);
  EXPECT_EQ(case_params(c).window_right, -1);
  EXPECT_EQ(case_params(c).softcap, 0.0f);
}

TEST(CaseCodec, DefaultScaleIsOneOverSqrtDRoundedToFloat) {
  Case c;
  c.head_dim = 64;
  EXPECT_EQ(c.softmax_scale(), 0.125f);
  c.head_dim = 128;  // 2^-3.5: the float nearest to 0.08838834764831845
  EXPECT_EQ(c.softmax_scale(), static_cast<float>(0.08838834764831845));
  c.head_dim = 80;
  EXPECT_EQ(c.softmax_scale(), static_cast<float>(1.0 / std::sqrt(80.0)));
  c.scale = -2.5f;
  EXPECT_EQ(c.softmax_scale(), -2.5f);
}

TEST(CaseCodec, EqualityIsSemantic) {
  ValueSpec x{DistKind::kConst, 1.0, 5.0}, y{DistKind::kConst, 1.0, 7.0};
  EXPECT_EQ(x, y);  // b is unused by const
  y.a = -1.0;
  EXPECT_NE(x, y);
  Injection nan1{'q', 0, 0, 0, 0, std::numeric_limits<double>::quiet_NaN()};
  Injection nan2 = nan1;
  nan2.value = -std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(nan1, nan2);
  Injection zero{'q', 0, 0, 0, 0, 0.0}, neg_zero{'q', 0, 0, 0, 0, -0.0};
  EXPECT_NE(zero, neg_zero);
}

struct BadLine {
  const char* line;
  const char* message;  // expected substring
};

// Every line (with `suffix` appended) rejected as kInvalidArgument, its message holding the expected text, *out untouched.
void expect_rejected(std::span<const BadLine> bad_lines, const std::string& suffix) {
  for (const BadLine& bad : bad_lines) {
    Case c;
    c.seed = 99;
    const Status status = parse_case(std::string(bad.line) + suffix, &c);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << bad.line;
    EXPECT_NE(status.message().find(bad.message), std::string::npos)
        << "line: " << bad.line << "\nmessage: " << status.message() << "\nexpected: " << bad.message;
    EXPECT_EQ(c.seed, 99u) << "*out must be untouched on failure: " << bad.line;
  }
}

// Random Cases with sequences (pages, poison, splits, injections inside the sequences) survive format -> parse.
TEST(CaseCodec, RandomSequenceCasesRoundTrip) {
  constexpr int kCases = 1000;
  uint32_t key[2] = {0x5e95, 0};
  int64_t counter = 0;
  auto next = [&]() {
    const uint32_t ctr[4] = {static_cast<uint32_t>(counter++), 0, 0, 0};
    uint32_t out[4];
    Philox4x32::generate(ctr, key, out);
    return uint64_t{out[0]} << 32 | out[1];
  };
  for (int n = 0; n < kCases; ++n) {
    Case c;
    c.dtype = static_cast<DType>(next() % 3);
    c.heads_kv = 1 + static_cast<int64_t>(next() % 3);
    c.heads_q = c.heads_kv * (1 + static_cast<int64_t>(next() % 3));
    c.head_dim = 1 + static_cast<int64_t>(next() % 256);
    c.layout = static_cast<Layout>(next() % 2);
    c.pad = static_cast<int64_t>(next() % 3);
    c.seqs.resize(1 + next() % 5);
    c.seqlen_q = 0;
    c.seqlen_k = 0;
    for (Sequence& s : c.seqs) {
      s = {static_cast<int64_t>(next() % 300), static_cast<int64_t>(next() % 300),
           next() % 2 ? static_cast<int64_t>(next() % 20) : 0};
      c.seqlen_q = std::max(c.seqlen_q, s.q);
      c.seqlen_k = std::max(c.seqlen_k, s.k + s.extra);
    }
    c.batch = static_cast<int64_t>(c.seqs.size());
    c.page = next() % 2 ? 1 + static_cast<int64_t>(next() % 64) : 0;
    c.poison = static_cast<Poison>(next() % kPoisonCount);
    c.splits = static_cast<int32_t>(next() % 4);
    const Sequence& first = c.seqs[0];
    if (first.q > 0 && first.k > 0 && next() % 2) {
      c.inject.push_back({'q', 0, c.heads_q - 1, static_cast<int64_t>(next() % first.q), 0, 1.5});
      c.inject.push_back({'v', 0, 0, first.k - 1, c.head_dim - 1, -std::numeric_limits<double>::infinity()});
    }
    c.seed = next();
    ASSERT_TRUE(validate_case(c).ok()) << validate_case(c).message();
    const std::string line = format_case(c);
    Case parsed;
    const Status status = parse_case(line, &parsed);
    ASSERT_TRUE(status.ok()) << line << "\n" << status.message();
    EXPECT_EQ(parsed, c) << line;
    EXPECT_EQ(format_case(parsed), line);
  }
}

TEST(CaseCodec, SequenceTokensCanonicalise) {
  Case c;
  ASSERT_TRUE(parse_case("f16 splits=2 poison=zero page=04 seqs=2:3+0,0:1+1 sk=3 sq=2 b=2 seed=1", &c).ok());
  EXPECT_EQ(format_case(c),
            "f16 b=2 hq=1 hkv=1 sq=2 sk=3 d=1 mask=none seqs=2:3,0:1+1 page=4 poison=zero splits=2 q=normal(0,1) "
            "k=normal(0,1) v=normal(0,1) seed=1");
  ASSERT_EQ(c.seqs.size(), size_t{2});
  EXPECT_EQ(c.seqs[1], (Sequence{0, 1, 1}));
  EXPECT_EQ(c.seqs[1].capacity(), 2);
  // The defaults are left out: poison=nan, splits=1.
  ASSERT_TRUE(parse_case("f32 poison=nan splits=1 seqs=1:1 seed=0", &c).ok());
  EXPECT_EQ(c.poison, Poison::kNaN);
  EXPECT_EQ(c.splits, 1);
  EXPECT_EQ(format_case(c), "f32 b=1 hq=1 hkv=1 sq=1 sk=1 d=1 mask=none seqs=1:1 q=normal(0,1) k=normal(0,1) "
                            "v=normal(0,1) seed=0");
  EXPECT_STREQ(to_string(Poison::kInf), "inf");
  EXPECT_STREQ(to_string(static_cast<Poison>(9)), "?");
}

TEST(CaseCodec, SequenceTokenErrorsNameTheirToken) {
  const BadLine kBad[] = {
      {"f16 seqs=", "'seqs=' at column 5: empty sequence list"},
      {"f16 seqs=3", "'seqs=3' at column 5: sequence '3' must look like Q:K or Q:K+E"},
      {"f16 seqs=3:x", "sequence '3:x': k 'x' not a decimal integer"},
      {"f16 seqs=3:4+", "sequence '3:4+': extra '' missing number"},
      {"f16 seqs=-1:2", "sequence '-1:2': q '-1' must be non-negative"},
      {"f16 seqs=1:1,,1:1", "sequence '' must look like Q:K"},
      {"f16 seqs=1:1 seqs=1:1", "duplicate key 'seqs' at column 14"},
      {"f16 b=2 sq=3 sk=4 seqs=3:4", "'seqs=3:4' at column 19: b=2 but seqs lists 1 sequence (b is the number of "
                                     "sequences)"},
      {"f16 b=1 sq=2 sk=4 seqs=3:4", "'sq=2' at column 9: sq=2 but the largest q of seqs is 3 (sq bounds every q)"},
      {"f16 seqs=3:4", "'seqs=3:4' at column 5: sq=1 but the largest q of seqs is 3"},
      {"f16 sq=3 sk=4 seqs=3:4+1", "'sk=4' at column 10: sk=4 but the largest k + extra of seqs is 5"},
      {"f16 b=2 sq=2147483647 sk=1 seqs=2147483647:1,1:1", "'seqs=2147483647:1,1:1' at column 28: seqs: the q rows "
                                                            "total more than int32 holds"},
      {"f16 b=2 sq=1 sk=2147483647 seqs=1:2147483647,1:1", "seqs: the k + extra slots total more than int32 holds"},
      {"f16 sq=1 sk=2147483648 seqs=1:2147483647+1", "seqs: sequence 0: q and k + extra must fit int32"},
      {"f16 sq=1 sk=2147483647 seqs=1:2147483647 page=1", "'page=1' at column 42: page=1: 2147483648 pages"},
      {"f16 page=0", "'page=0' at column 5: must be >= 1 keys per page"},
      {"f16 page=-3", "'page=-3' at column 5: must be non-negative"},
      {"f16 page=16", "'page=16' at column 5: page=16: paged K/V needs seqs"},
      {"f16 poison=nan2", "'poison=nan2' at column 5: unknown poison (known: nan, inf, zero)"},
      {"f16 poison=inf", "'poison=inf' at column 5: poison=inf: needs seqs"},
      {"f16 splits=-1", "'splits=-1' at column 5: must be a non-negative decimal integer"},
      {"f16 splits=2147483648", "'splits=2147483648' at column 5: does not fit in int32"},
      {"f16 splits=x", "'splits=x' at column 5: not a decimal integer"},
      {"f16 b=2 sq=4 sk=4 seqs=2:4,4:1+3 inject=q[0,0,2,0]:1", "q[0,0,2,0]:1: row index 2 outside sequence 0's q=2"},
      {"f16 b=2 sq=4 sk=4 seqs=2:4,4:1+3 inject=k[1,0,1,0]:1", "row index 1 outside sequence 1's k=1 (seqs)"},
  };
  expect_rejected(kBad, " seed=1");
}

// Strides and totals of case_params with sequences (case.h): packed Q and O, packed or paged K and V, both layouts.
TEST(CaseCodec, CaseParamsWithSequences) {
  const std::string shape = "f16 b=3 hq=4 hkv=2 sq=10 sk=12 d=6 pad=2 mask=causal-br seqs=10:5+7,0:0,3:12";
  constexpr int64_t kRow = 8;  // d + pad
  for (const bool bshd : {false, true}) {
    Case c;
    ASSERT_TRUE(parse_case(shape + (bshd ? " layout=bshd" : "") + " splits=2 seed=1", &c).ok());
    Params p = case_params(c);
    EXPECT_EQ(p.batch, 3);
    EXPECT_EQ(p.seqlen_q, 10);
    EXPECT_EQ(p.seqlen_k, 12);
    EXPECT_EQ(p.num_splits, 2);
    EXPECT_EQ(p.total_q, 13);
    EXPECT_EQ(p.total_k, 24);  // capacities 12 + 0 + 12
    const Strides q = bshd ? Strides{0, kRow, 4 * kRow} : Strides{0, 13 * kRow, kRow};
    const Strides k = bshd ? Strides{0, kRow, 2 * kRow} : Strides{0, 24 * kRow, kRow};
    for (const auto& [name, got, want] : {std::tuple{"q", p.q_stride, q}, std::tuple{"o", p.o_stride, q},
                                          std::tuple{"k", p.k_stride, k}, std::tuple{"v", p.v_stride, k}}) {
      EXPECT_EQ(got.batch, want.batch) << name << " bshd " << bshd;
      EXPECT_EQ(got.head, want.head) << name << " bshd " << bshd;
      EXPECT_EQ(got.row, want.row) << name << " bshd " << bshd;
    }
    EXPECT_EQ(p.page_size, 0);
    EXPECT_EQ(p.num_pages, 0);
    EXPECT_EQ(p.cu_seqlens_q, nullptr);  // the arrays live in HostInputs
    EXPECT_EQ(p.seqused_k, nullptr);

    ASSERT_TRUE(parse_case(shape + (bshd ? " layout=bshd" : "") + " page=5 seed=1", &c).ok());
    p = case_params(c);
    EXPECT_EQ(p.num_splits, 1);
    EXPECT_EQ(p.total_q, 13);
    EXPECT_EQ(p.total_k, 0);
    EXPECT_EQ(p.page_size, 5);
    EXPECT_EQ(p.max_pages_per_seq, 3);  // ceil(12 / 5)
    EXPECT_EQ(p.num_pages, 3 + 0 + 3 + 1);  // and the spare page
    // [num_pages, 5, hkv, R] or [num_pages, hkv, 5, R]: .batch is the page stride.
    const Strides paged = bshd ? Strides{5 * 2 * kRow, kRow, 2 * kRow} : Strides{2 * 5 * kRow, 5 * kRow, kRow};
    for (const Strides& got : {p.k_stride, p.v_stride}) {
      EXPECT_EQ(got.batch, paged.batch) << "bshd " << bshd;
      EXPECT_EQ(got.head, paged.head) << "bshd " << bshd;
      EXPECT_EQ(got.row, paged.row) << "bshd " << bshd;
    }
    EXPECT_EQ(p.q_stride.row, q.row);
    EXPECT_EQ(p.page_table, nullptr);
  }
  // Sequences without keys still have a page-table row: max_pages_per_seq is at least 1.
  Case c;
  ASSERT_TRUE(parse_case("f32 b=2 sq=1 sk=0 seqs=1:0,0:0 page=4 seed=0", &c).ok());
  const Params p = case_params(c);
  EXPECT_EQ(p.max_pages_per_seq, 1);
  EXPECT_EQ(p.num_pages, 1);
  EXPECT_EQ(sequence_pages(Sequence{3, 4, 1}, 4), 2);
  EXPECT_EQ(sequence_pages(Sequence{3, 4, 0}, 4), 1);
  EXPECT_EQ(sequence_pages(Sequence{3, 0, 0}, 4), 0);
}

TEST(CaseCodec, ParseErrorsNameTokenColumnAndReason) {
  const BadLine kBad[] = {
      {"", "empty case line"},
      {"   ", "empty case line"},
      {"f64 b=1", "unknown dtype 'f64' at column 1"},
      {"b=1 f16", "unknown dtype 'b=1' at column 1"},
      {"f16 b=1 hd=64", "unknown key 'hd' at column 9"},
      {"f16 b1", "expected key=value, got 'b1' at column 5"},
      {"f16 b=-1", "'b=-1' at column 5: must be non-negative"},
      {"f16 sq=9223372036854775808", "'sq=9223372036854775808' at column 5: does not fit in int64"},
      {"f16 sk=12x", "'sk=12x' at column 5: not a decimal integer"},
      {"f16 d=", "'d=' at column 5: missing number"},
      {"f16 pad=-2", "'pad=-2' at column 5: must be non-negative"},
      {"f16 b=1 b=2", "duplicate key 'b' at column 9"},
      {"f16 seed=-3", "'seed=-3' at column 5: must be a non-negative decimal integer"},
      {"f16 seed=18446744073709551616", "does not fit in uint64"},
      {"f16 mask=causal", "'mask=causal' at column 5: unknown mask"},
      {"f16 layout=sbhd", "unknown layout"},
      {"f16 q=gauss(0,1)", "'q=gauss(0,1)' at column 5: unknown distribution 'gauss'"},
      {"f16 q=normal", "expected name(params)"},
      {"f16 k=normal(0)", "normal takes 2 parameters, got 1"},
      {"f16 v=subnormal(1)", "subnormal takes 0 parameters, got 1"},
      {"f16 q=normal(0,-1)", "sigma must be finite and >= 0"},
      {"f16 q=normal(nan,1)", "mu must be finite"},
      {"f16 q=uniform(1,0)", "lo must be <= hi"},
      {"f16 q=uniform(-1e308,1e308)", "hi - lo overflows double"},
      {"f16 q=nearmax(-0.5)", "frac must be finite and >= 0"},
      {"f16 q=dominant(1,inf)", "big must be finite and >= 0"},
      {"f16 q=normal(0,1e999)", "'1e999' is outside the range of double"},
      {"f16 q=normal(0,x)", "'x' is not a number"},
      {"f16 scale=nan", "softmax scale must be finite"},
      {"f16 scale=1e40", "outside the range of float"},
      {"f16 scale=", "not a number"},
      {"f16 inject=", "empty injection list"},
      {"f16 inject=x[0,0,0,0]:1", "must look like q[b,h,s,d]:value"},
      {"f16 inject=q[0,0,0]:1", "needs exactly four indices"},
      {"f16 inject=q[0,0,0,0,0]:1", "needs exactly four indices"},
      {"f16 inject=q[0,0,0,0]", "must look like q[b,h,s,d]:value"},
      {"f16 inject=q[0,-1,0,0]:1", "index '-1' must be non-negative"},
      {"f16 inject=q[0,0,0,0]:big", "'big' is not a number"},
      {"f16 sq=4 inject=q[0,0,4,0]:nan", "'inject=q[0,0,4,0]:nan' at column 10: q[0,0,4,0]:nan: row index 4 outside sq=4"},
      {"f16 hq=2 hkv=1 inject=k[0,1,0,0]:1", "head index 1 outside hkv=1"},
      {"f16 b=2 inject=v[2,0,0,0]:1", "batch index 2 outside b=2"},
      {"f16 d=8 inject=q[0,0,0,0]:1;q[0,0,0,8]:1", "column index 8 outside d=8"},
      {"f16 sk=0 inject=k[0,0,0,0]:1", "row index 0 outside sk=0"},
      {"f16 mask=window-br", "'mask=window-br' at column 5: mask window-br needs window=L,R"},
      {"f16 sq=4 window=3,0", "'window=3,0' at column 10: window: only mask=window-br or mask=window-tl take a window "
                              "(mask is none)"},
      {"f16 window=-1,0 mask=causal-tl", "'window=-1,0' at column 5: window: only mask=window-br or mask=window-tl "
                                         "take a window (mask is causal-tl)"},
      {"f16 mask=window-tl window=-2,0", "'window=-2,0' at column 20: window_left '-2' must be -1 (unbounded) or >= 0"},
      {"f16 mask=window-tl window=1,-5", "window_right '-5' must be -1 (unbounded) or >= 0"},
      {"f16 mask=window-tl window=1,x", "window_right 'x': not a decimal integer"},
      {"f16 mask=window-tl window=,1", "window_left '': missing number"},
      {"f16 mask=window-tl window=99999999999999999999,1", "window_left '99999999999999999999': does not fit in int64"},
      {"f16 mask=window-tl window=1", "expected window=L,R"},
      {"f16 mask=window-tl window=1,2,3", "expected window=L,R"},
      {"f16 mask=window-tl window=1,2 window=1,2", "duplicate key 'window'"},
      {"f16 softcap=-1", "'softcap=-1' at column 5: softcap must be finite and >= 0"},
      {"f16 softcap=nan", "'softcap=nan' at column 5: softcap must be finite and >= 0"},
      {"f16 softcap=inf", "softcap must be finite and >= 0"},
      {"f16 softcap=1e40", "'softcap=1e40' at column 5: outside the range of float"},
      {"f16 softcap=", "'softcap=' at column 5: not a number"},
      {"f16 softcap=3x", "not a number"},
      {"f16 sink=normal(0,-1)", "'sink=normal(0,-1)' at column 5: sigma must be finite and >= 0"},
      {"f16 sink=gauss(0,1)", "'sink=gauss(0,1)' at column 5: unknown distribution 'gauss'"},
      {"f16 sink=const(1,2)", "const takes 1 parameter, got 2"},
      {"f16 sink=const(1) sink=const(2)", "duplicate key 'sink' at column 19"},
  };
  expect_rejected(kBad, "");
}

TEST(CaseCodec, GradAndDoutErrorsNameTheirKey) {
  const BadLine kBad[] = {
      {"f16 dout=normal(0,1)", "'dout=normal(0,1)' at column 5: dout needs grad=1"},
      {"f16 dout=uniform(-1,1) d=8", "'dout=uniform(-1,1)' at column 5: dout needs grad=1"},
      {"f16 grad=0 dout=normal(0,2)", "'dout=normal(0,2)' at column 12: dout needs grad=1"},
      {"f16 grad=2", "'grad=2' at column 5: must be 1 (check the backward pass too) or 0"},
      {"f16 grad=", "'grad=' at column 5: must be 1"},
      {"f16 grad=true", "'grad=true' at column 5: must be 1"},
      {"f16 grad=01", "'grad=01' at column 5: must be 1"},
      {"f16 grad=-1", "'grad=-1' at column 5: must be 1"},
      {"f16 grad=1 grad=1", "duplicate key 'grad' at column 12"},
      {"f16 grad=1 dout=normal(0,-1)", "'dout=normal(0,-1)' at column 12: sigma must be finite and >= 0"},
      {"f16 grad=1 dout=gauss(0,1)", "'dout=gauss(0,1)' at column 12: unknown distribution 'gauss'"},
      {"f16 grad=1 dout=const(1) dout=const(2)", "duplicate key 'dout' at column 26"},
      {"f16 grad=1 inject=o[0,0,0,0]:1", "must look like q[b,h,s,d]:value (tensor q, k or v)"},
      {"f16 gradient=1", "unknown key 'gradient' at column 5"},
      {"f16 gradient=1", "sink descale grad dout inject"},  // the known keys, in canonical order
  };
  expect_rejected(kBad, " seed=1");
}

// descale=DIST: the fp8 descales, only with f8e4m3, from uniform or const in fp32's positive normal range; written
// after the sink, read back to the same case.
TEST(CaseCodec, DescaleRoundTripsAndErrorsNameTheKey) {
  const std::string line =
      "f8e4m3 b=2 hq=4 hkv=2 sq=3 sk=5 d=32 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) sink=const(0) "
      "descale=uniform(0.25,4) seed=7";
  Case c;
  ASSERT_TRUE(parse_case(line, &c).ok()) << parse_case(line, &c).message();
  EXPECT_EQ(c.dtype, DType::kF8E4M3);
  ASSERT_TRUE(c.descale.has_value());
  EXPECT_EQ(*c.descale, (ValueSpec{DistKind::kUniform, 0.25, 4.0}));
  EXPECT_EQ(format_case(c), line);
  c.descale = ValueSpec{DistKind::kConst, 0.5, 1.0};
  Case back;
  ASSERT_TRUE(parse_case(format_case(c), &back).ok());
  EXPECT_EQ(back, c);
  EXPECT_TRUE(validate_case(c).ok());
  Case wrong_dtype = c;
  wrong_dtype.dtype = DType::kBF16;
  EXPECT_NE(validate_case(wrong_dtype).message().find("descale=const(0.5): only with dtype f8e4m3"), std::string::npos)
      << validate_case(wrong_dtype).message();
  const BadLine kBad[] = {
      {"bf16 descale=const(1)", "'descale=const(1)' at column 6: descale only with dtype f8e4m3"},
      {"f8e4m3 descale=normal(1,0.1)", "'descale=normal(1,0.1)' at column 8: a descale is drawn from uniform(lo,hi) or const(c)"},
      {"f8e4m3 descale=const(0)", "'descale=const(0)' at column 8: descales must lie in fp32's positive normal range"},
      {"f8e4m3 descale=uniform(-1,1)", "descales must lie in fp32's positive normal range"},
      {"f8e4m3 descale=uniform(1,1e39)", "descales must lie in fp32's positive normal range"},
      {"f8e4m3 descale=const(1e-40)", "descales must lie in fp32's positive normal range"},
      {"f8e4m3 descale=const(1) descale=const(2)", "duplicate key 'descale' at column 25"},
  };
  expect_rejected(kBad, " seed=1");
}

TEST(CaseCodec, DropoutErrorsNameTheirKey) {
  const BadLine kBad[] = {
      {"f16 dropout=1", "'dropout=1' at column 5: dropout must be in [0, 1)"},
      {"f16 dropout=-0.1", "'dropout=-0.1' at column 5: dropout must be in [0, 1)"},
      {"f16 dropout=nan", "'dropout=nan' at column 5: dropout must be in [0, 1)"},
      {"f16 dropout=0.5 dropout=0.5", "duplicate key 'dropout' at column 17"},
      {"f16 drop_seed=3", "'drop_seed=3' at column 5: drop_seed needs dropout=P with P > 0"},
      {"f16 dropout=0 drop_offset=1", "'drop_offset=1' at column 15: drop_offset needs dropout=P with P > 0"},
      {"f16 dropout=0.5 drop_seed=-1", "'drop_seed=-1' at column 17"},
      {"f16 dropout=0.5 drop_offset=18446744073709551616", "'drop_offset=18446744073709551616' at column 17"},
      {"f16 gradient=1", "softcap dropout drop_seed drop_offset q"},  // the known keys, in canonical order
  };
  expect_rejected(kBad, " seed=1");
}

TEST(CaseCodec, SeedIsRequired) {
  // No silent default: a line without seed= (or a bare dtype) is an error that names the field.
  Case c;
  for (const char* line : {"f32", "f16 b=1 hq=2 sq=4 sk=4 d=8"}) {
    const Status status = parse_case(line, &c);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << line;
    EXPECT_EQ(status.message().rfind("seed: missing", 0), 0u) << status.message();
  }
  const Status bad = parse_case("f32 d=4 seed=x1", &c);
  EXPECT_NE(bad.message().find("'seed=x1' at column 9: not a decimal integer"), std::string::npos) << bad.message();
}

TEST(CaseCodec, LongOrBinaryTokensAreEchoedShortAndEscaped) {
  const std::string token = "b=" + std::string(100000, '7') + "\x01";
  Case c;
  const Status status = parse_case("f32 " + token + " seed=1", &c);
  ASSERT_FALSE(status.ok());
  EXPECT_LT(status.message().size(), 200u) << status.message();
  EXPECT_NE(status.message().find("(100003 bytes)"), std::string::npos) << status.message();
  EXPECT_EQ(excerpt("a\tb\n\x01\xff"), "a\\tb\\n\\x01\\xff");
  EXPECT_EQ(excerpt(std::string(300, 'x')), std::string(200, 'x') + "... (300 bytes)");
}

TEST(CaseCodec, KernelContractIsNotTheParsersBusiness) {
  // can_implement rejects these; the case line must still be able to express them.
  Case c;
  EXPECT_TRUE(parse_case("f16 d=0 hq=3 hkv=2 sq=0 sk=0 seed=0", &c).ok());
  EXPECT_TRUE(parse_case("f32 d=100000 b=0 seed=0", &c).ok());
}

TEST(CaseCodec, ValidateCaseChecksProgrammaticCases) {
  Case c;
  c.seqlen_k = -1;
  EXPECT_NE(validate_case(c).message().find("sk=-1: must be non-negative"), std::string::npos);
  c = Case{};
  c.inject.push_back({'o', 0, 0, 0, 0, 1.0});
  EXPECT_NE(validate_case(c).message().find("is not q, k or v"), std::string::npos);
  c = Case{};
  c.scale = std::numeric_limits<float>::infinity();
  EXPECT_NE(validate_case(c).message().find("scale must be finite"), std::string::npos);
  c = Case{};
  c.v = {DistKind::kNormal, 0.0, -1.0};
  EXPECT_NE(validate_case(c).message().find("v=normal: sigma"), std::string::npos);
  c = Case{};
  c.mask = Mask::kCausalBottomRight;
  c.window_left = 8;
  EXPECT_NE(validate_case(c).message().find("window=8,-1: only mask=window-br or mask=window-tl take a window"),
            std::string::npos)
      << validate_case(c).message();
  c.mask = Mask::kWindowTopLeft;
  EXPECT_TRUE(validate_case(c).ok()) << validate_case(c).message();
  c.window_right = -3;
  EXPECT_NE(validate_case(c).message().find("window_right=-3: must be -1 (unbounded) or >= 0"), std::string::npos);
  c = Case{};
  c.softcap = -0.5f;
  EXPECT_NE(validate_case(c).message().find("softcap must be finite and >= 0"), std::string::npos);
  c.softcap = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(validate_case(c).message().find("softcap must be finite and >= 0"), std::string::npos);
  c = Case{};
  c.sink = ValueSpec{DistKind::kUniform, 2.0, 1.0};
  EXPECT_NE(validate_case(c).message().find("sink=uniform: lo must be <= hi"), std::string::npos);
  // dout: its parameters, and only with grad (its default is no dout at all: it is what a forward case holds).
  c = Case{};
  c.dout = ValueSpec{DistKind::kUniform, -1.0, 1.0};
  EXPECT_NE(validate_case(c).message().find("dout=uniform(-1,1): needs grad=1"), std::string::npos)
      << validate_case(c).message();
  EXPECT_NE(format_case(c).find(" dout=uniform(-1,1) "), std::string::npos);  // printed, so that parse_case refuses it
  Case reparsed;
  EXPECT_NE(parse_case(format_case(c), &reparsed).message().find("dout needs grad=1"), std::string::npos);
  c.grad = true;
  EXPECT_TRUE(validate_case(c).ok()) << validate_case(c).message();
  c.dout = ValueSpec{DistKind::kNormal, 0.0, -1.0};
  EXPECT_NE(validate_case(c).message().find("dout=normal: sigma must be finite and >= 0"), std::string::npos)
      << validate_case(c).message();
  c = Case{};
  c.grad = true;
  EXPECT_TRUE(validate_case(c).ok()) << validate_case(c).message();
  // Sequences, pages, poison and splits.
  const auto message = [](const Case& x) { return validate_case(x).message(); };
  c = Case{};
  c.page = 8;
  EXPECT_NE(message(c).find("page=8: paged K/V needs seqs"), std::string::npos) << message(c);
  c = Case{};
  c.poison = Poison::kZero;
  EXPECT_NE(message(c).find("poison=zero: needs seqs"), std::string::npos) << message(c);
  c.poison = static_cast<Poison>(5);
  EXPECT_NE(message(c).find("poison: unknown value 5"), std::string::npos) << message(c);
  c = Case{};
  c.splits = -2;
  EXPECT_NE(message(c).find("splits=-2: must be >= 0"), std::string::npos) << message(c);
  c = Case{};
  c.seqs = {{1, 1, 0}, {1, 1, 0}};
  EXPECT_NE(message(c).find("b=1 but seqs lists 2 sequences"), std::string::npos) << message(c);
  c.batch = 2;
  EXPECT_TRUE(validate_case(c).ok()) << message(c);
  c.seqs[1].extra = -1;
  EXPECT_NE(message(c).find("seqs: sequence 1: q, k and extra must be non-negative"), std::string::npos) << message(c);
  c.seqs[1] = {1, 1, 2};
  EXPECT_NE(message(c).find("sk=1 but the largest k + extra of seqs is 3"), std::string::npos) << message(c);
  c.seqlen_k = 3;
  c.page = -1;
  EXPECT_NE(message(c).find("page=-1: must be >= 1"), std::string::npos) << message(c);
  c.page = 2;
  EXPECT_TRUE(validate_case(c).ok()) << message(c);
  c.inject.push_back({'v', 1, 0, 1, 0, 1.0});  // sequence 1 has one key: row 1 is an extra slot
  EXPECT_NE(message(c).find("row index 1 outside sequence 1's k=1"), std::string::npos) << message(c);
}

// sq and sk bound the sequences (as Params' seqlen_q / seqlen_k do): a batch whose other sequences are emptied keeps
// them, and with them every value of the remaining sequence.
TEST(CaseCodec, SeqlensBoundTheSequences) {
  const std::string line = "bf16 b=3 hq=4 hkv=2 sq=9 sk=40 d=16 mask=causal-br seqs=0:0,3:17+2,0:0 page=16 "
                           "q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=7";
  Case c;
  ASSERT_TRUE(parse_case(line, &c).ok()) << parse_case(line, &c).message();
  EXPECT_EQ(format_case(c), line);
  EXPECT_EQ(c.seqlen_q, 9);
  EXPECT_EQ(case_params(c).seqlen_k, 40);
}

}  // namespace
}  // namespace flashcheck
