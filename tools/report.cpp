// flashcheck-report: the verification report (the README's main job). Runs a fixed sweep aimed at the
// kernel's own tiles (every head_dim family, seqlens 1, 2, tile-1, tile, tile+1, seqlen_q != seqlen_k both
// ways, both causal alignments, GQA and MQA, fully masked rows, padded and [B, S, H, D] layouts; sliding windows
// with edges on tile boundaries, softcaps and sinks) plus seeded random cases, for each dtype, on the GPU kernel
// (or the host model), and prints one line per failing case, a table per dtype (cases, failures, worst
// error/bound ratio of O and LSE, max error in eps) and the same per feature (window, softcap, sink) and dtype.
// With --json PATH it also writes the results as JSON (docs/report-json.md). Exit status: the most severe
// outcome over all cases (flashcheck/outcome.h, README "Exit codes"). Every line it prints about a case is
// replayable.
#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <new>
#include <optional>
#include <iostream>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "flashcheck/attention.h"
#include "flashcheck/admission.h"
#include "flashcheck/backward_check.h"
#include "flashcheck/budget.h"
#include "flashcheck/device_inputs.h"
#include "flashcheck/case.h"
#include "flashcheck/cli.h"
#include "flashcheck/device.h"
#include "flashcheck/dtype.h"
#include "flashcheck/inputs.h"
#include "flashcheck/kernel_facts.h"
#include "flashcheck/loaded_subject.h"
#include "flashcheck/mask_names.h"
#include "flashcheck/oracle_bridge.h"
#include "flashcheck/progress.h"
#include "flashcheck/outcome.h"
#include "flashcheck/runner.h"
#include "flashcheck/verdict.h"

namespace flashcheck {
namespace {

constexpr std::array<int64_t, 8> kHeadDims{1, 8, 40, 64, 96, 128, 200, 256};
constexpr int64_t kDefaultRandomPerDtype = 150;
constexpr int64_t kDefaultRandomFeaturesPerDtype = 50;
constexpr int64_t kDefaultRandomSequencesPerDtype = 40;
constexpr uint32_t kReportStream = 0x7265;  // Philox stream id of the report's own draws ("re")
constexpr uint64_t kFeatureDrawsKey = 0x77696e64;  // added to the seed for the feature cases' draws ("wind")
constexpr uint64_t kSequenceDrawsKey = 0x73657173;  // the same for the inference path's cases ("seqs")
constexpr uint64_t kValueDimDrawsKey = 0x64762020;  // the same for the head_dim_v != head_dim cases ("dv  ")
constexpr int64_t kDefaultRandomValueDimsPerDtype = 24;
constexpr int64_t kDefaultBackwardPerDtype = 16;
constexpr uint64_t kDropoutDrawsKey = 0x64726f70;  // the dropout cases' draws ("drop")
constexpr int64_t kDefaultRandomDropoutPerDtype = 16;

// Deterministic draws for the random part of the sweep (same cases on every machine).
class Draws {
 public:
  explicit Draws(uint64_t seed) : key_{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)} {}
  uint32_t next() {
    if (used_ == 4) {
      const uint32_t counter[4] = {static_cast<uint32_t>(index_), static_cast<uint32_t>(index_ >> 32),
                                   kReportStream, 0};
      Philox4x32::generate(counter, key_, block_);
      ++index_;
      used_ = 0;
    }
    return block_[used_++];
  }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
  template <typename T, size_t N>
  T pick(const std::array<T, N>& options) { return options[static_cast<size_t>(below(N))]; }

 private:
  uint32_t key_[2];
  uint32_t block_[4] = {};
  int used_ = 4;
  uint64_t index_ = 0;
};

// Tiles the kernel would use for this dtype/head_dim (and head_dim_v, 0 = head_dim; contiguous layout), so the sweep
// aims at them.
KernelConfig tiles_for(DType dtype, int64_t head_dim, int64_t head_dim_v = 0) {
  Params p = make_params(dtype, 1, 1, 1, 128, 128, head_dim);
  if (head_dim_v != 0) set_head_dim_v(&p, head_dim_v, Layout::kBHSD);
  return kernel_config(p);
}

Case base_case(DType dtype, int64_t d, uint64_t seed) {
  Case c;
  c.dtype = dtype;
  c.head_dim = d;
  c.q = {DistKind::kNormal, 0.0, 1.0};
  c.k = {DistKind::kNormal, 0.0, 1.0};
  c.v = {DistKind::kUniform, -1.0, 1.0};
  c.seed = seed;
  return c;
}

// The backward section: grad=1 cases over the features the backward pass serves (masks of both alignments, windows,
// softcap, sinks, GQA, unequal head dims, packed varlen with slots past the keys), head dims 24 to 256, seqlens at
// and off the backward kernels' 32-row and 32-key tiles. `count` cases per dtype, each shape with its own seed.
std::vector<Case> backward_cases(DType dtype, int64_t count, uint64_t seed_base) {
  struct Shape {
    int64_t b, hq, hkv, sq, sk, d, dv;
    Mask mask;
    int64_t window_left, window_right;
    float softcap;
    bool sink, varlen;
  };
  static const Shape kShapes[] = {
      {1, 2, 1, 40, 70, 64, 0, Mask::kCausalBottomRight, -1, -1, 0.0f, false, false},
      {2, 4, 2, 129, 257, 128, 0, Mask::kCausalTopLeft, -1, -1, 0.0f, false, false},
      {1, 4, 2, 70, 90, 64, 32, Mask::kWindowTopLeft, 20, 5, 5.0f, true, false},
      {1, 3, 3, 33, 65, 24, 0, Mask::kNone, -1, -1, 0.0f, false, false},
      {3, 2, 1, 64, 96, 40, 0, Mask::kCausalBottomRight, -1, -1, 0.0f, false, true},
      {1, 2, 1, 100, 160, 256, 128, Mask::kNone, -1, -1, 0.0f, false, false},
      {1, 8, 1, 96, 96, 96, 0, Mask::kWindowBottomRight, 31, 0, 30.0f, true, false},
      {2, 2, 2, 31, 33, 192, 128, Mask::kCausalBottomRight, -1, -1, 0.0f, true, false},
  };
  constexpr int64_t kShapeCount = static_cast<int64_t>(sizeof kShapes / sizeof kShapes[0]);
  std::vector<Case> cases;
  for (int64_t n = 0; n < count; ++n) {
    const Shape& s = kShapes[n % kShapeCount];
    Case c = base_case(dtype, s.d, seed_base + static_cast<uint64_t>(n));
    c.batch = s.b;
    c.heads_q = s.hq;
    c.heads_kv = s.hkv;
    c.seqlen_q = s.sq;
    c.seqlen_k = s.sk;
    c.head_dim_v = s.dv;
    c.mask = s.mask;
    c.window_left = s.window_left;
    c.window_right = s.window_right;
    c.softcap = s.softcap;
    if (s.sink) c.sink = ValueSpec{DistKind::kNormal, 0.0, 1.0};
    if (s.varlen) {
      for (int64_t b = 0; b < s.b; ++b) c.seqs.push_back({s.sq - 17 * b, s.sk - 29 * b, b});
    }
    c.grad = true;
    c.dout = {DistKind::kNormal, 0.0, 1.0};
    cases.push_back(c);
  }
  return cases;
}

// Cases with a dropout (attention.h, "Dropout"): drop probabilities from rare to most keys, the contract's seed and
// offset drawn whole (offsets past 2^32 included), masks of both kinds, softcaps and sinks beside it, seqlens at and
// off the tiles; every other case grad=1, for the backward section.
std::vector<Case> random_dropout_cases(DType dtype, int64_t count, Draws& draws, uint64_t seed_base) {
  constexpr std::array<float, 5> kProbabilities{0.1f, 0.17f, 0.5f, 0.9f, 0.01f};
  constexpr std::array<int64_t, 5> kDims{32, 64, 96, 128, 40};
  constexpr std::array<Mask, 3> kMasks{Mask::kNone, Mask::kCausalBottomRight, Mask::kWindowTopLeft};
  constexpr std::array<int64_t, 5> kOffsets{-1, 0, 1, 2, -3};
  std::vector<Case> cases;
  for (int64_t n = 0; n < count; ++n) {
    Case c = base_case(dtype, draws.pick(kDims), seed_base + static_cast<uint64_t>(n));
    const KernelConfig t = tiles_for(dtype, c.head_dim);
    const auto near_tile = [&](int64_t block) {
      return std::max<int64_t>(1, block * (1 + draws.below(3)) + draws.pick(kOffsets));
    };
    c.batch = 1 + draws.below(2);
    c.heads_kv = 1 + draws.below(2);
    c.heads_q = c.heads_kv * (1 + draws.below(2));
    c.seqlen_q = near_tile(t.block_m);
    c.seqlen_k = near_tile(t.block_n);
    c.mask = draws.pick(kMasks);
    if (c.mask == Mask::kWindowTopLeft) {
      c.window_left = t.block_n + draws.pick(kOffsets);
      c.window_right = draws.below(3);
    }
    if (draws.below(4) == 0) c.softcap = 20.0f;
    if (draws.below(4) == 0) c.sink = ValueSpec{DistKind::kNormal, 0.0, 1.0};
    c.dropout = draws.pick(kProbabilities);
    c.drop_seed = uint64_t{draws.next()} << 32 | draws.next();
    c.drop_offset = draws.below(2) == 0 ? draws.below(1024) : uint64_t{draws.next()} << 32 | draws.next();
    if (n % 2 == 1) {
      c.grad = true;
      c.dout = {DistKind::kNormal, 0.0, 1.0};
    }
    cases.push_back(c);
  }
  return cases;
}

// The structured part: per head_dim, the tile-boundary shapes the acceptance list names.
std::vector<Case> structured_cases(DType dtype) {
  std::vector<Case> cases;
  uint64_t seed = 1;
  for (int64_t d : kHeadDims) {
    const KernelConfig t = tiles_for(dtype, d);
    const int64_t bm = t.block_m, bn = t.block_n;
    struct Shape {
      int64_t hq, hkv, sq, sk;
      Mask mask;
      Layout layout;
      int64_t pad;
    };
    const std::vector<Shape> shapes{
        {1, 1, 1, 1, Mask::kNone, Layout::kBHSD, 0},
        {2, 2, 2, 2, Mask::kCausalTopLeft, Layout::kBHSD, 0},
        {2, 1, bm - 1, bn - 1, Mask::kNone, Layout::kBHSD, 0},               // MQA, tile - 1
        {4, 2, bm, bn, Mask::kCausalBottomRight, Layout::kBSHD, 0},          // GQA, exactly one tile
        {2, 2, bm + 1, bn + 1, Mask::kCausalTopLeft, Layout::kBHSD, 3},      // tile + 1, padded rows
        {2, 1, bm + 3, 2 * bn + 1, Mask::kCausalBottomRight, Layout::kBHSD, 0},  // seqlen_q < seqlen_k
        {2, 2, 2 * bn + 5, bn - 1, Mask::kCausalBottomRight, Layout::kBSHD, 0},  // seqlen_q > seqlen_k: fully masked rows
        {3, 3, 2 * bm - 1, bn + 7, Mask::kCausalTopLeft, Layout::kBHSD, 0},  // seqlen_q > seqlen_k, top-left
    };
    for (const Shape& s : shapes) {
      Case c = base_case(dtype, d, seed++);
      c.batch = 2;
      c.heads_q = s.hq;
      c.heads_kv = s.hkv;
      c.seqlen_q = std::max<int64_t>(s.sq, 1);
      c.seqlen_k = std::max<int64_t>(s.sk, 1);
      c.mask = s.mask;
      c.layout = s.layout;
      c.pad = s.pad;
      cases.push_back(c);
    }
    // Windows, softcaps and sinks on the same tiles: window edges on a K-tile boundary -1/0/+1, the diagonal
    // alone, a first K tile no row sees, saturating and typical softcaps on scores of magnitude 30 and more,
    // sinks above, below and among the scores, and a sink on rows without keys.
    struct FeatureShape {
      int64_t sq, sk;
      Mask mask;
      int64_t left, right;
      float softcap;
      std::optional<ValueSpec> sink;
      double qk_sigma;
    };
    const ValueSpec near{DistKind::kNormal, 0.0, 2.0}, above{DistKind::kConst, 80.0, 0.0},
        mixed{DistKind::kRamp, -60.0, 60.0}, none_sink{DistKind::kConst, -std::numeric_limits<double>::infinity(), 0.0};
    const std::vector<FeatureShape> features{
        {bm + 3, 2 * bn + 1, Mask::kWindowBottomRight, bn - 1, 0, 0.0f, std::nullopt, 1.0},  // left edge at a boundary
        {bn + 1, bn + 1, Mask::kWindowTopLeft, 0, 0, 0.0f, std::nullopt, 1.0},                // the diagonal alone
        {bm + 1, 3 * bn + 5, Mask::kWindowBottomRight, bn, bn + 1, 0.0f, near, 1.0},          // first K tile unseen
        {2 * bn + 1, bn - 1, Mask::kWindowTopLeft, 2, -1, 0.0f, std::nullopt, 1.0},           // seqlen_q > seqlen_k
        {bm, bn + 1, Mask::kCausalBottomRight, -1, -1, 2.0f, std::nullopt, 8.0},              // saturating softcap
        {bm + 1, 2 * bn, Mask::kNone, -1, -1, 30.0f, mixed, 4.0},                              // typical softcap, sinks
        {2 * bn + 5, bn - 1, Mask::kCausalBottomRight, -1, -1, 0.0f, above, 1.0},              // sinks on keyless rows
        {bm - 1, bn + 1, Mask::kWindowBottomRight, bn + 1, bn - 1, 50.0f, none_sink, 8.0},    // all three; -inf sink
    };
    for (const FeatureShape& f : features) {
      Case c = base_case(dtype, d, seed++);
      c.batch = 2;
      c.heads_q = 4;
      c.heads_kv = 2;
      c.seqlen_q = std::max<int64_t>(f.sq, 1);
      c.seqlen_k = std::max<int64_t>(f.sk, 1);
      c.mask = f.mask;
      c.window_left = f.left;
      c.window_right = f.right;
      c.softcap = f.softcap;
      c.sink = f.sink;
      c.q.b = c.k.b = f.qk_sigma;
      cases.push_back(c);
    }
  }
  return cases;
}

// Random cases of the inference path, from their own draws: 1-5 sequences of their own lengths (empty ones, one
// row, tile edges, one long among short), poisoned slots past some sequences' keys, K/V packed or paged (page sizes
// 1, 3, 16, the tile, twice the tile, 256), split counts 1, 2, 3, 17 and the heuristic's; a decoding step (every
// sequence within one 16-row tile of the decode family) in half of them.
std::vector<Case> random_sequence_cases(DType dtype, int64_t count, Draws& draws, uint64_t seed_base) {
  constexpr std::array<int64_t, 6> kDims{8, 40, 64, 96, 128, 256};
  constexpr std::array<Mask, 4> kMasks{Mask::kNone, Mask::kCausalBottomRight, Mask::kCausalTopLeft,
                                       Mask::kWindowBottomRight};
  constexpr std::array<int64_t, 5> kOffsets{-1, 0, 1, 2, -3};
  constexpr std::array<int32_t, 5> kSplits{1, 2, 3, 17, 0};
  std::vector<Case> cases;
  for (int64_t n = 0; n < count; ++n) {
    const int64_t d = draws.pick(kDims);
    Case c = base_case(dtype, d, seed_base + static_cast<uint64_t>(n));
    c.heads_kv = 1 + draws.below(2);
    c.heads_q = c.heads_kv * (1 + draws.below(4));
    const bool decoding = draws.below(2) == 0;
    const KernelConfig t = tiles_for(dtype, d);
    const int64_t max_q = decoding ? 16 / (c.heads_q / c.heads_kv) : 3 * t.block_m;
    const auto near_tile = [&](int64_t block, int64_t cap) {
      switch (draws.below(4)) {
        case 0: return int64_t{0};
        case 1: return std::min<int64_t>(1, cap);
        default: return std::clamp<int64_t>(block * (1 + draws.below(3)) + draws.pick(kOffsets), 0, cap);
      }
    };
    const int64_t sequences = 1 + draws.below(5);
    const int64_t long_one = draws.below(sequences + 1);  // == sequences: none
    for (int64_t b = 0; b < sequences; ++b) {
      Sequence s;
      s.q = decoding ? 1 + draws.below(max_q) : near_tile(t.block_m, max_q);
      s.k = b == long_one ? 1024 + draws.below(1024) : near_tile(t.block_n, 4 * t.block_n);
      s.extra = draws.below(3) == 0 ? 1 + draws.below(40) : 0;
      c.seqs.push_back(s);
      c.seqlen_q = std::max(c.seqlen_q, s.q);
      c.seqlen_k = std::max(c.seqlen_k, s.capacity());
    }
    c.batch = sequences;
    c.mask = draws.pick(kMasks);
    if (c.mask == Mask::kWindowBottomRight) {
      c.window_left = t.block_n + draws.pick(kOffsets);
      c.window_right = draws.below(2) == 0 ? 0 : -1;
    }
    const std::array<int64_t, 7> pages{0, 1, 3, 16, t.block_n, 2 * t.block_n, 256};
    c.page = draws.pick(pages);
    c.poison = static_cast<Poison>(draws.below(kPoisonCount));
    c.splits = draws.pick(kSplits);
    cases.push_back(c);
  }
  return cases;
}

// Cases whose V and O have a width of their own (head_dim_v != head_dim): the pairs models ship half the time, any
// other pair of the sweep's head dims otherwise; dense, split-KV or sequences (packed or paged; dense in their place
// when `sequences` is false: a subject that declares none), rows near the tiles.
std::vector<Case> random_value_dim_cases(DType dtype, int64_t count, Draws& draws, uint64_t seed_base,
                                         bool sequences) {
  using Pair = std::pair<int64_t, int64_t>;
  constexpr std::array<Pair, 4> kShipped{{{192, 128}, {128, 64}, {64, 128}, {256, 128}}};
  constexpr std::array<int64_t, 8> kDims{8, 32, 40, 64, 96, 128, 200, 256};
  constexpr std::array<Mask, 4> kMasks{Mask::kNone, Mask::kCausalBottomRight, Mask::kCausalTopLeft,
                                       Mask::kWindowBottomRight};
  constexpr std::array<int64_t, 5> kOffsets{-1, 0, 1, 2, -3};
  std::vector<Case> cases;
  for (int64_t n = 0; n < count; ++n) {
    Pair dims = draws.below(2) == 0 ? draws.pick(kShipped) : Pair{draws.pick(kDims), draws.pick(kDims)};
    if (dims.second == dims.first) dims.second = dims.first == 128 ? 64 : 128;
    Case c = base_case(dtype, dims.first, seed_base + static_cast<uint64_t>(n));
    c.head_dim_v = dims.second;
    const KernelConfig t = tiles_for(dtype, dims.first, dims.second);
    const auto near_tile = [&](int64_t block) {
      return std::max<int64_t>(1, block * (1 + draws.below(2)) + draws.pick(kOffsets));
    };
    c.heads_kv = 1 + draws.below(2);
    c.heads_q = c.heads_kv * (1 + draws.below(3));
    c.mask = draws.pick(kMasks);
    if (c.mask == Mask::kWindowBottomRight) {
      c.window_left = t.block_n + draws.pick(kOffsets);
      c.window_right = 0;
    }
    switch (draws.below(4)) {
      case 0:  // split-KV
        c.seqlen_q = near_tile(t.block_m);
        c.seqlen_k = 2 * near_tile(t.block_n);
        c.splits = 3;
        break;
      case 1: {  // sequences, paged half the time
        const int64_t count_seqs = 1 + draws.below(3);
        if (!sequences) {
          c.seqlen_q = near_tile(t.block_m);
          c.seqlen_k = near_tile(t.block_n);
          break;
        }
        for (int64_t b = 0; b < count_seqs; ++b) {
          Sequence s;
          s.q = draws.below(2) == 0 ? 1 : near_tile(t.block_m);
          s.k = near_tile(t.block_n);
          c.seqs.push_back(s);
          c.seqlen_q = std::max(c.seqlen_q, s.q);
          c.seqlen_k = std::max(c.seqlen_k, s.capacity());
        }
        c.batch = count_seqs;
        if (draws.below(2) == 0) c.page = t.block_n;
        break;
      }
      default:  // dense
        c.batch = 1 + draws.below(2);
        c.seqlen_q = near_tile(t.block_m);
        c.seqlen_k = near_tile(t.block_n);
        break;
    }
    cases.push_back(c);
  }
  return cases;
}

// The random part: shapes near tile multiples, GQA ratios, masks, layouts and value scales drawn from `draws`.
std::vector<Case> random_cases(DType dtype, int64_t count, Draws& draws, uint64_t seed_base) {
  constexpr std::array<int64_t, 12> kDims{1, 8, 16, 32, 40, 64, 80, 96, 128, 160, 200, 256};
  constexpr std::array<Mask, 3> kMasks{Mask::kNone, Mask::kCausalBottomRight, Mask::kCausalTopLeft};
  constexpr std::array<int64_t, 4> kGroups{1, 2, 4, 8};
  constexpr std::array<int64_t, 5> kOffsets{-1, 0, 1, 2, -3};
  constexpr std::array<double, 5> kSigmas{0.25, 1.0, 2.0, 4.0, 8.0};
  std::vector<Case> cases;
  for (int64_t n = 0; n < count; ++n) {
    const int64_t d = draws.pick(kDims);
    const KernelConfig t = tiles_for(dtype, d);
    Case c = base_case(dtype, d, seed_base + static_cast<uint64_t>(n));
    c.batch = 1 + draws.below(2);
    c.heads_kv = 1 + draws.below(2);
    c.heads_q = c.heads_kv * draws.pick(kGroups);
    const auto near_tile = [&](int64_t block) {
      return std::max<int64_t>(1, block * (draws.below(3) + (draws.below(2) == 0 ? 0 : 1)) + draws.pick(kOffsets));
    };
    c.seqlen_q = near_tile(t.block_m);
    c.seqlen_k = draws.below(5) == 0 ? 1 + draws.below(4) : near_tile(t.block_n);
    c.mask = draws.pick(kMasks);
    c.layout = draws.below(3) == 0 ? Layout::kBSHD : Layout::kBHSD;
    c.pad = draws.below(4) == 0 ? draws.below(9) : 0;
    c.q.b = draws.pick(kSigmas);
    c.k.b = draws.pick(kSigmas);
    if (draws.below(4) == 0) c.v = {DistKind::kNormal, 0.0, draws.pick(kSigmas)};
    cases.push_back(c);
  }
  return cases;
}

// Random cases with at least one of window, softcap and sink, from their own draws (so the plain random cases
// stay what they were): a window of either alignment in two cases of three, sides aimed at the tiles; a softcap
// in one of two (saturating on large scores, or typical); a sink in one of two, and in every case with neither
// of the others.
std::vector<Case> random_feature_cases(DType dtype, int64_t count, Draws& draws, uint64_t seed_base) {
  constexpr std::array<int64_t, 8> kDims{8, 32, 40, 64, 96, 128, 200, 256};
  constexpr std::array<int64_t, 5> kOffsets{-1, 0, 1, 2, -3};
  constexpr std::array<float, 6> kSoftcaps{0.5f, 2.0f, 5.0f, 20.0f, 30.0f, 50.0f};
  const std::array<ValueSpec, 6> kSinks{{{DistKind::kNormal, 0.0, 2.0},
                                        {DistKind::kConst, 80.0, 0.0},
                                        {DistKind::kConst, -80.0, 0.0},
                                        {DistKind::kRamp, -60.0, 60.0},
                                        {DistKind::kDominant, 1.0, 200.0},
                                        {DistKind::kConst, -std::numeric_limits<double>::infinity(), 0.0}}};
  std::vector<Case> cases;
  for (int64_t n = 0; n < count; ++n) {
    const int64_t d = draws.pick(kDims);
    const KernelConfig t = tiles_for(dtype, d);
    Case c = base_case(dtype, d, seed_base + static_cast<uint64_t>(n));
    c.batch = 1 + draws.below(2);
    c.heads_kv = 1 + draws.below(2);
    c.heads_q = c.heads_kv * (1 + draws.below(4));
    const auto near_tile = [&](int64_t block) {
      return std::max<int64_t>(1, block * (draws.below(3) + 1) + draws.pick(kOffsets));
    };
    c.seqlen_q = near_tile(t.block_m);
    c.seqlen_k = near_tile(t.block_n);
    if (draws.below(3) != 0) {
      c.mask = draws.below(2) == 0 ? Mask::kWindowBottomRight : Mask::kWindowTopLeft;
      const auto side = [&]() -> int64_t {
        switch (draws.below(5)) {
          case 0: return -1;
          case 1: return 0;
          case 2: return draws.below(8);
          default: return t.block_n * (1 + draws.below(2)) + draws.pick(kOffsets);
        }
      };
      c.window_left = side();
      c.window_right = side();
    }
    if (draws.below(2) == 0) {
      c.softcap = draws.pick(kSoftcaps);
      if (c.softcap <= 5.0f) c.q.b = c.k.b = 8.0;  // scores of 30 and more: tanh saturates
    }
    if (draws.below(2) == 0 || (!takes_window(c.mask) && c.softcap == 0.0f)) c.sink = draws.pick(kSinks);
    cases.push_back(c);
  }
  return cases;
}

struct Worsts {
  int64_t cases = 0, failures = 0;
  double worst_o = 0.0, worst_lse = 0.0;
  std::string worst_case;
  void add(const Verdict& v) {
    if (v.o.ratio > worst_o || worst_case.empty()) {
      worst_o = std::max(worst_o, v.o.ratio);
      worst_case = v.case_line;
    }
    worst_lse = std::max(worst_lse, v.lse.ratio);
  }
};

struct DtypeSummary {
  int64_t cases = 0, failures = 0, rows = 0, elements = 0, fully_masked_cases = 0;
  int64_t o_claims = 0, o_informative = 0, outside_domain = 0;  // informative O checks (verdict.h); OUTSIDE-DOMAIN cases
  double worst_o = 0.0, worst_lse = 0.0, max_err_eps = 0.0;
  std::string worst_case;
  Worsts window, softcap, sink;   // the cases with each feature (a case may have several)
  Worsts varlen, paged, split;    // the inference path's: sequences, a paged cache, num_splits != 1
  Worsts dv;                      // head_dim_v != head_dim
  Worsts dropout;                 // dropout_p > 0
};

// The per-feature tallies, in the order the tables and the JSON list them.
constexpr std::array<std::pair<const char*, Worsts DtypeSummary::*>, 8> kFeatures{{{"window", &DtypeSummary::window},
                                                                                  {"softcap", &DtypeSummary::softcap},
                                                                                  {"sink", &DtypeSummary::sink},
                                                                                  {"varlen", &DtypeSummary::varlen},
                                                                                  {"paged", &DtypeSummary::paged},
                                                                                  {"split", &DtypeSummary::split},
                                                                                  {"dv", &DtypeSummary::dv},
                                                                                  {"dropout", &DtypeSummary::dropout}}};

// SIGINT and SIGTERM (Ctrl-C, `timeout`): the case in progress finishes, the later ones are counted as not run, and
// the tables and the JSON of what ran are written before the process exits with exit_interrupted(signal). A second
// signal ends it at once.
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void request_stop(int signal_number) {
  if (g_stop_signal != 0) std::_Exit(exit_interrupted(signal_number));
  g_stop_signal = signal_number;
}
const char* signal_name(int signal_number) { return signal_number == SIGINT ? "SIGINT" : signal_number == SIGTERM ? "SIGTERM" : "a signal"; }

// One case's result as the JSON lists it; `verdict` only for cases that ran.
struct CaseRecord {
  std::string line;
  Outcome outcome = Outcome::kPass;
  std::string reason;
  std::optional<Verdict> verdict;
};

// A ratio for JSON: non-finite ratios (a NaN where a number was expected) have no JSON number, so they are null.
nlohmann::json ratio_json(double ratio) { return std::isfinite(ratio) ? nlohmann::json(ratio) : nlohmann::json(nullptr); }

nlohmann::json worsts_json(const Worsts& w) {
  return {{"cases", w.cases},
          {"failed", w.failures},
          {"worst_o_ratio", ratio_json(w.worst_o)},
          {"worst_lse_ratio", ratio_json(w.worst_lse)},
          {"worst_o_case", w.worst_case}};
}

// The report as JSON, docs/report-json.md: the same numbers as the printed tables plus one entry per case.
nlohmann::json report_json(const std::string& backend, const std::string& subject, bool lse_written, double seconds,
                           int64_t not_run, int stop_signal, Outcome overall,
                           const std::array<int64_t, kOutcomeCount>& counts,
                           const std::map<DType, DtypeSummary>& summary, const std::map<std::string, int64_t>& paths,
                           const std::vector<CaseRecord>& records) {
  nlohmann::json doc;
  doc["schema"] = "flashcheck-report/1";
  doc["backend"] = backend;
  if (!subject.empty()) doc["subject"] = subject;
  doc["lse_written"] = lse_written;
  doc["seconds"] = seconds;
  doc["outcome"] = to_string(overall);
  doc["exit_code"] = stop_signal != 0 ? exit_interrupted(stop_signal) : exit_code(overall);
  doc["complete"] = not_run == 0;
  if (stop_signal != 0) doc["interrupted_by"] = signal_name(stop_signal);
  nlohmann::json& count = doc["counts"];
  count["cases"] = records.size();
  count["not_run"] = not_run;
  for (Outcome o : {Outcome::kPass, Outcome::kFail, Outcome::kRejected, Outcome::kUnsupported, Outcome::kOutsideDomain}) {
    count[to_string(o)] = counts[static_cast<size_t>(o)];
  }
  doc["kernel_paths"] = paths;
  doc["dtypes"] = nlohmann::json::array();
  for (const auto& [dtype, s] : summary) {
    doc["dtypes"].push_back({{"dtype", to_string(dtype)},
                             {"cases", s.cases},
                             {"failed", s.failures},
                             {"rows_checked", s.rows},
                             {"elements_checked", s.elements},
                             {"fully_masked_cases", s.fully_masked_cases},
                             {"worst_o_ratio", ratio_json(s.worst_o)},
                             {"worst_lse_ratio", ratio_json(s.worst_lse)},
                             {"max_o_err_eps", ratio_json(s.max_err_eps)},
                             {"worst_o_case", s.worst_case},
                             {"features", [&s] {
                                nlohmann::json features;
                                for (const auto& [name, member] : kFeatures) features[name] = worsts_json(s.*member);
                                return features;
                              }()}});
  }
  doc["cases"] = nlohmann::json::array();
  for (const CaseRecord& r : records) {
    nlohmann::json entry = {{"case", r.line}, {"outcome", to_string(r.outcome)}};
    if (!r.reason.empty()) entry["reason"] = r.reason;
    if (r.verdict) {
      const Verdict& v = *r.verdict;
      entry["kernel"] = v.config;
      entry["o_ratio"] = ratio_json(v.o.ratio);
      entry["lse_ratio"] = ratio_json(v.lse.ratio);
      entry["rms_ratio"] = ratio_json(v.rms_ratio);
      entry["rms_flush_left_out"] = v.rms_flush_left_out;
      entry["max_o_err_eps"] = ratio_json(v.max_err_eps);
      entry["rows_checked"] = v.rows_checked;
      entry["failures"] = v.failures;
    }
    doc["cases"].push_back(std::move(entry));
  }
  return doc;
}

bool has_fully_masked_row(const Case& c) {
  return c.mask != Mask::kNone && judged_visible_keys(case_params(c), 0).size() == 0;
}

// A sweep case moved inside a subject's capabilities: its sequences onto the declared sequence features
// (onto_sequence_features), the nearest head_dim it takes for the dtype, head_dim_v inside its value dims (equal to
// head_dim without them), its first mask of the same kind (window or not), heads_kv = heads_q without GQA, a layout
// it takes without padding, no softcap or sink it lacks, seqlens onto its shape limits; injections that no longer fit
// the shape are dropped. Nullopt when its dtype is not among the subject's.
std::optional<Case> fit_to(const LoadedSubject& subject, Case c) {
  const fc_subject_capabilities& caps = subject.descriptor().capabilities;
  if (!subject.takes_dtype(c.dtype)) return std::nullopt;
  if (c.dtype == DType::kF8E4M3 && !subject.fp8()->descales) c.descale.reset();
  c = onto_sequence_features(subject, std::move(c));
  c.head_dim = subject.nearest_head_dim(c.dtype, c.head_dim);
  if (const auto& dims = subject.value_dims(); dims && c.head_dim_v != 0) {
    c.head_dim_v = std::clamp<int64_t>(c.head_dim_v, dims->head_dim_v_min, dims->head_dim_v_max);
  } else {
    c.head_dim_v = 0;
  }
  if (!(caps.masks & (1u << static_cast<int>(c.mask)))) {
    std::optional<Mask> same_kind, other;
    for (const MaskName& m : kMaskNames) {
      if (!(caps.masks & (1u << static_cast<int>(m.mask)))) continue;
      if (m.takes_window == takes_window(c.mask) && !same_kind) same_kind = m.mask;
      if (!other) other = m.mask;
    }
    const Mask mask = same_kind ? *same_kind : *other;
    if (!takes_window(mask)) c.window_left = c.window_right = -1;
    if (takes_window(mask) && !takes_window(c.mask)) c.window_right = 0;  // (-1, 0): causal spelt as a window
    c.mask = mask;
  }
  if (!caps.gqa) c.heads_kv = c.heads_q;
  if (!(caps.layouts & FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_STRIDED))) c.pad = 0;
  if (!(caps.layouts & FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_BSHD))) c.layout = Layout::kBHSD;
  if (!(caps.layouts & (FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_BHSD) | FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_STRIDED)))) {
    c.layout = Layout::kBSHD;
  }
  if (!caps.softcap) c.softcap = 0.0f;
  if (!caps.sink) c.sink.reset();
  // The shape limits: each seqlen up to the next multiple, within the minimum and the maximum.
  const fc_subject_limits& l = subject.limits();
  c.seqlen_q = seqlen_onto_limits(c.seqlen_q, l.seqlen_q_multiple, l.seqlen_q_min, l.seqlen_q_max);
  c.seqlen_k = seqlen_onto_limits(c.seqlen_k, l.seqlen_k_multiple, l.seqlen_k_min, l.seqlen_k_max);
  Case check;
  if (!parse_case(format_case(c), &check).ok()) c.inject.clear();
  return c;
}

}  // namespace
}  // namespace flashcheck

int main(int argc, char** argv) {
  using namespace flashcheck;
  std::string backend_name;
  int64_t random_per_dtype = kDefaultRandomPerDtype;
  int64_t random_features_per_dtype = kDefaultRandomFeaturesPerDtype;
  int64_t random_sequences_per_dtype = kDefaultRandomSequencesPerDtype;
  int64_t random_value_dims_per_dtype = kDefaultRandomValueDimsPerDtype;
  int64_t backward_per_dtype = kDefaultBackwardPerDtype;
  int64_t random_dropout_per_dtype = kDefaultRandomDropoutPerDtype;
  uint64_t seed = 20261122;
  std::string cases_file;
  bool verbose = false;
  CLI::App app{"The verification report: a sweep aimed at the kernel's tiles plus seeded random cases per dtype, each "
               "judged against the oracle.",
               "flashcheck-report"};
  app.add_option("--backend", backend_name, "gpu (default when a CUDA device is present) or model (the host model)")
      ->check(CLI::IsMember({"gpu", "model"}));
  std::string subject_path;
  app.add_option("--subject", subject_path,
                 "run on the subject library at PATH (flashcheck/subject.h); the sweep keeps the cases inside its "
                 "capabilities");
  app.add_option("--random", random_per_dtype, "random cases per dtype besides the tile-boundary sweep")
      ->check(cli::kCaseCount)
      ->capture_default_str();
  app.add_option("--random-features", random_features_per_dtype,
                 "random cases per dtype with a window, softcap or sink")
      ->check(cli::kCaseCount)
      ->capture_default_str();
  app.add_option("--random-sequences", random_sequences_per_dtype,
                 "random cases per dtype of the inference path (varlen, paged K/V, split-KV)")
      ->check(cli::kCaseCount)
      ->capture_default_str();
  app.add_option("--random-dv", random_value_dims_per_dtype,
                 "random cases per dtype whose V and O have a head dim of their own (head_dim_v != head_dim)")
      ->check(cli::kCaseCount)
      ->capture_default_str();
  app.add_option("--random-dropout", random_dropout_per_dtype,
                 "random cases per dtype with a dropout, every other one grad=1 (in the backward section); on a "
                 "subject, for the dtypes its dropout declares (fc_subject_dropout_v1)")
      ->check(cli::kCaseCount)
      ->capture_default_str();
  app.add_option("--backward", backward_per_dtype,
                 "grad=1 cases per dtype in the backward section (dQ, dK, dV and dsink against the oracle's bound, "
                 "dQ, dK and dV against a same-precision reference's RMS error; on a subject where it declares a "
                 "backward pass; with --cases its grad=1 lines)")
      ->capture_default_str()
      ->check(cli::kCaseCount);
  app.add_option("--seed", seed, "seed of the random cases' draws (a decimal uint64)")
      ->check(cli::kDecimalU64)
      ->capture_default_str();
  app.add_option("--cases", cases_file,
                 "run the case lines of FILE (one per line; blank lines and '#' comments skipped) instead of the sweep");
  app.add_flag("--verbose", verbose, "print a line for every passing case too");
  std::string json_path;
  app.add_option("--json", json_path, "also write the results as JSON to PATH (schema: docs/report-json.md)");
  std::string memory_cap_text;
  app.add_option("--memory-cap", memory_cap_text, "reject a case whose estimated host memory is over SIZE (bytes, or "
                                                  "with K, M, G, T; default: FLASHCHECK_MEMORY_CAP, else 16G or the "
                                                  "available memory, the lower)")
      ->check(cli::kMemorySize);
  app.footer(std::string(cli::kExitCodesHelp) +
             "\n  130, 143 stopped by SIGINT, SIGTERM (Ctrl-C, timeout): the cases judged so far are printed and "
             "written to --json (\"complete\": false, the rest counted as not run)\n"
             "  73 the --json file cannot be written (checked before the first case)");
  if (const int early = cli::parse(app, argc, argv); early >= 0) return early;
  if (!json_path.empty() && !cli::writable_output(json_path)) {
    std::fprintf(stderr, "flashcheck-report: --json: cannot write %s (a missing directory, a directory, no permission)\n",
                 excerpt(json_path).c_str());
    return kExitCantCreate;
  }
  // From here on a stop signal ends the run with what it judged (a signal the caller ignores stays ignored, as for a
  // background job's SIGINT).
  for (const int stop : {SIGINT, SIGTERM}) {
    if (std::signal(stop, request_stop) == SIG_IGN) std::signal(stop, SIG_IGN);
  }
  int64_t memory_cap = 0;
  if (const Status s = memory_cap_text.empty() ? memory_cap_from_environment(&memory_cap)
                                               : parse_memory_size(memory_cap_text, &memory_cap);
      !s.ok()) {
    std::fprintf(stderr, "flashcheck-report: %s\nRun with --help for more information.\n", s.message().c_str());
    return kExitUsage;
  }
  if (Status s = select_device_from_environment(); !s.ok()) {
    std::fprintf(stderr, "flashcheck-report: %s\n", s.message().c_str());
    return kExitUnavailable;
  }
  std::unique_ptr<LoadedSubject> subject;
  if (!subject_path.empty()) {
    if (!backend_name.empty()) {
      std::fprintf(stderr, "flashcheck-report: --subject runs the subject: it takes no --backend\n");
      return kExitUsage;
    }
    if (Status s = LoadedSubject::load(subject_path, &subject); !s.ok()) {
      std::fprintf(stderr, "flashcheck-report: %s\n", s.message().c_str());
      return kExitBadSubject;
    }
    if (subject->on_device() && !device_available()) {
      std::fprintf(stderr, "flashcheck-report: subject %s takes device memory: no CUDA device available\n",
                   subject->name().c_str());
      return kExitUnavailable;
    }
  }
  Backend backend = device_available() ? Backend::kGpu : Backend::kHostModel;
  if (backend_name == "gpu") backend = Backend::kGpu;
  if (backend_name == "model") backend = Backend::kHostModel;
  if (!subject && backend == Backend::kGpu && !device_available()) {
    std::fprintf(stderr, "flashcheck-report: --backend gpu: no CUDA device available\n");
    return kExitUnavailable;
  }

  std::vector<Case> dropout_grad_cases;  // the generated grad=1 dropout cases, for the backward section
  std::vector<Case> cases;
  std::vector<CaseRecord> records;  // one per case, in order, for the JSON (rejected lines of --cases first)
  if (!cases_file.empty()) {
    std::ifstream in;
    if (!cli::open_input_file(cases_file, &in)) {
      std::fprintf(stderr, "flashcheck-report: cannot open %s\n", excerpt(cases_file).c_str());
      return kExitNoInput;
    }
    std::string line;
    int case_lines = 0;
    for (int line_no = 1; std::getline(in, line); ++line_no) {
      if (!holds_case_line(line)) continue;
      ++case_lines;
      Case c;
      if (Status st = parse_case(line, &c); !st.ok()) {
        // A line that does not parse is a rejected case (named by its line number), not the end of the report.
        const Verdict v = refused(line, st);
        std::printf("%s:%d: %s", excerpt(cases_file).c_str(), line_no, v.report().c_str());
        records.push_back({v.case_line, v.outcome, v.reason, {}});
        continue;
      }
      // A line naming another subject than this run's is a usage error (as for flashcheck-repro), not a case for
      // whatever this run loaded.
      if (const std::string why = wrong_subject(c, subject.get()); !why.empty()) {
        std::fprintf(stderr, "flashcheck-report: %s:%d: %s\n", excerpt(cases_file).c_str(), line_no, why.c_str());
        return kExitUsage;
      }
      if (subject && c.subject.empty()) c.subject = subject->name();
      cases.push_back(c);
    }
    if (case_lines == 0) {
      std::fprintf(stderr, "flashcheck-report: '%s' holds no case line\n", excerpt(cases_file).c_str());
      return kExitUsage;
    }
  } else {
    Draws draws(seed);
    Draws feature_draws(seed + kFeatureDrawsKey);
    Draws sequence_draws(seed + kSequenceDrawsKey);
    Draws value_dim_draws(seed + kValueDimDrawsKey);
    Draws dropout_draws(seed + kDropoutDrawsKey);
    for (const DTypeInfo& row : kDTypes) {
      const DType dtype = row.dtype;
      if (dtype == DType::kF8E4M3) {
        // The fp8 path takes neither dropout, paged K/V nor split-KV: its structured and random dense cases, on the
        // host model, on the GPU where the library has the fp8 kernel (sm_90a builds) and on a subject that declares
        // an fp8 path (fc_subject_fp8_v1).
        if (subject && !subject->fp8()) {
          std::printf("%s: not run (the subject declares no fp8 path: " FC_SUBJECT_FP8_ENTRY_POINT ")\n", row.name);
          continue;
        }
#if !defined(FLASHCHECK_HAS_FP8)
        if (!subject && backend != Backend::kHostModel) {
          std::printf("%s: not run (this library has no fp8 kernel: sm_90a builds have it; --backend model runs the "
                      "path)\n", row.name);
          continue;
        }
#endif
        // Every other random case with descales (the [batch, heads_kv] values drawn from the case's seed).
        std::vector<Case> r = random_cases(dtype, random_per_dtype, draws, seed + 1000);
        for (size_t i = 1; i < r.size(); i += 2) r[i].descale = ValueSpec{DistKind::kUniform, 0.5, 2.0};
        for (const std::vector<Case>& part : {structured_cases(dtype), r}) cases.insert(cases.end(), part.begin(), part.end());
        continue;
      }
      std::vector<Case> s = structured_cases(dtype);
      std::vector<Case> r = random_cases(dtype, random_per_dtype, draws, seed + 1000);
      std::vector<Case> f = random_feature_cases(dtype, random_features_per_dtype, feature_draws, seed + 2000);
      // Sequences on a subject only where the library declares them (fc_subject_sequences_v1).
      const bool sequences = subject == nullptr || subject->sequences().has_value();
      std::vector<Case> q =
          random_sequence_cases(dtype, sequences ? random_sequences_per_dtype : 0, sequence_draws, seed + 3000);
      // V's own width on a subject only where the library declares the range it reads (fc_subject_value_dims_v1).
      const bool value_dims = subject == nullptr || subject->value_dims().has_value();
      std::vector<Case> v = random_value_dim_cases(dtype, value_dims ? random_value_dims_per_dtype : 0,
                                                   value_dim_draws, seed + 4000, sequences);
      // Dropout, on a subject where its library declares one for the dtype (fc_subject_dropout_v1): the forward ones
      // here, the grad=1 ones in the backward section.
      // A subject whose dropout is forward-only runs the grad=1 ones forward.
      const bool drops = subject == nullptr || subject->drops(dtype);
      const bool drops_backward = subject == nullptr || (drops && subject->dropout()->backward_dropout != nullptr);
      for (Case c : random_dropout_cases(dtype, drops ? random_dropout_per_dtype : 0, dropout_draws, seed + 6000)) {
        if (c.grad && !drops_backward) {
          c.grad = false;
          c.dout = ValueSpec{};
        }
        (c.grad ? dropout_grad_cases : cases).push_back(c);
      }
      cases.insert(cases.end(), s.begin(), s.end());
      cases.insert(cases.end(), r.begin(), r.end());
      cases.insert(cases.end(), f.begin(), f.end());
      cases.insert(cases.end(), q.begin(), q.end());
      cases.insert(cases.end(), v.begin(), v.end());
    }
  }
  // On a subject the sweep is moved inside its capabilities (fit_to; duplicates and cases of other dtypes
  // dropped), while a case line of --cases outside them is UNSUPPORTED; the line of every case names the
  // subject, so a failure replays against it.
  int64_t refitted = 0, dropped = 0;
  if (subject) {
    std::vector<Case> kept;
    std::set<std::string> seen;
    for (const Case& original : cases) {
      std::optional<Case> c = original;
      if (cases_file.empty() && !subject->supports(original).ok() && validate_shape(case_params(original)).ok()) {
        c = fit_to(*subject, original);
        ++refitted;
      }
      if (!c || !seen.insert(format_case(*c)).second) {
        ++dropped;
        continue;
      }
      if (c->subject.empty()) c->subject = subject->name();
      kept.push_back(*c);
    }
    cases = std::move(kept);
  }
  const std::string backend_text = subject ? "subject" : to_string(backend);

  if (subject) {
    std::printf("%s\nflashcheck verification report: subject %s, %zu cases (%lld sweep cases moved inside its "
                "capabilities, %lld left out: other dtypes or duplicates)\n",
                subject->describe().c_str(), subject->name().c_str(), cases.size(), static_cast<long long>(refitted),
                static_cast<long long>(dropped));
  } else {
    std::printf("flashcheck verification report: backend %s, %zu cases\n", to_string(backend), cases.size());
  }
  const auto start = std::chrono::steady_clock::now();
  std::map<DType, DtypeSummary> summary;
  std::map<std::string, int64_t> paths;
  ProgressLine progress("flashcheck-report", "cases");  // progress and an estimate on stderr
  int64_t not_run = 0;  // cases after one that lost the CUDA context, or after a stop signal
  int stop_signal = 0;  // the signal that left cases unrun (one after the last case leaves the run whole)
  // Before each case: whether a stop signal came, and if so the `left` cases of this section are not run.
  const auto stop_before = [&](int64_t left, const char* what) {
    if (g_stop_signal == 0) return false;
    stop_signal = g_stop_signal;
    not_run = left;
    std::printf("stopped by %s: %lld later %s not run\n", signal_name(stop_signal), static_cast<long long>(left), what);
    return true;
  };
  // The cases the forward section refused (rejected, unsupported or failed to run): their grad=1 lines do not run
  // in the backward section either.
  std::vector<bool> forward_refused(cases.size(), false);
  for (const Case& c : cases) {
    progress.update(&c - cases.data(), static_cast<int64_t>(cases.size()));
    if (stop_before(static_cast<int64_t>(cases.size()) - (&c - cases.data()), "cases")) break;
    DtypeSummary& s = summary[c.dtype];
    // The feature tallies of this case: cases counted up front, failures and worst ratios as they come.
    std::vector<Worsts*> features;
    if (takes_window(c.mask)) features.push_back(&s.window);
    if (c.softcap > 0.0f) features.push_back(&s.softcap);
    if (c.sink) features.push_back(&s.sink);
    if (!c.seqs.empty()) features.push_back(&s.varlen);
    if (c.page > 0) features.push_back(&s.paged);
    if (c.splits != 1) features.push_back(&s.split);
    if (c.value_dim() != c.head_dim) features.push_back(&s.dv);
    if (c.dropout > 0.0f) features.push_back(&s.dropout);
    ++s.cases;
    for (Worsts* w : features) ++w->cases;
    s.fully_masked_cases += has_fully_masked_row(c) ? 1 : 0;
    // A case that never ran: rejected or unsupported by its status (a CUDA error is a failure).
    const auto refuse = [&](const char* stage, const Status& st) {
      forward_refused[static_cast<size_t>(&c - cases.data())] = true;
      Verdict v = refused(format_case(c), st);
      if (v.outcome == Outcome::kFail) {
        ++s.failures;
        for (Worsts* w : features) ++w->failures;
      }
      std::printf("%s (%s: %s)\n  %s\n", to_string(v.outcome), stage, st.message().c_str(), v.case_line.c_str());
      records.push_back({v.case_line, v.outcome, std::string(stage) + ": " + st.message(), {}});
    };
    // Validated, estimated and admitted under the memory cap before anything is allocated (admission.h).
    AdmitOptions admit;
    admit.memory_cap = memory_cap;
    admit.host_inputs_limit = memory_cap;
    admit.host_model = backend == Backend::kHostModel;
    admit.subject = subject.get();
    Admission admission;
    if (Status st = admit_case(c, admit, &admission); !st.ok()) {
      refuse(admission.over_memory_cap ? "budget" : "case", st);
      continue;
    }
    if (admission.route == InputRoute::kDevice) {
      refuse("case", host_model_refusal(c, std::max(memory_cap, kHostInputsLimit)));
      continue;
    }
    const Budget& budget = admission.budget;
    if (budget.is_large()) {
      std::fprintf(stderr, "flashcheck-report: warning: %s needs %s\n", excerpt(format_case(c)).c_str(),
                   budget.summary().c_str());
    }
    HostInputs inputs;
    if (Status st = make_inputs(c, &inputs, memory_cap); !st.ok()) {
      refuse("inputs", st);
      continue;
    }
    // An allocation that fails (a memory cap above what the host holds) refuses the case, as the cap would have.
    RunOutputs out;
    std::optional<Verdict> judged;
    try {
      out = subject ? run_case(inputs, *subject) : run_case(inputs, backend);
      if (out.status.ok()) judged = judge(c, inputs, out);
    } catch (const std::bad_alloc&) {
      refuse("budget", allocation_refusal("the case's run and judgement"));
      continue;
    }
    if (!out.status.ok()) {
      refuse("run", out.status);
      if (out.status.code() == StatusCode::kCudaError && device_context_lost()) {
        // The case above crashed the device: every later CUDA call of this process fails with the same
        // error, so the cases after it are not run rather than failed one by one.
        not_run = static_cast<int64_t>(cases.size()) - (&c - cases.data()) - 1;
        std::printf("the CUDA context is lost (a sticky error in the case above): %lld later cases not run; replay "
                    "the case on its own with flashcheck-repro\n", static_cast<long long>(not_run));
        break;
      }
      continue;
    }
    ++paths[std::string(to_string(out.config.path)) + " " + out.config.name];
    const Verdict& v = *judged;
    records.push_back({v.case_line, v.outcome, v.reason, v});
    s.rows += v.rows_checked;
    s.elements += v.elements_checked;
    s.o_claims += v.o_claims;
    s.o_informative += v.o_informative;
    s.outside_domain += v.outcome == Outcome::kOutsideDomain ? 1 : 0;
    s.max_err_eps = std::max(s.max_err_eps, v.max_err_eps);
    if (v.o.ratio > s.worst_o) {
      s.worst_o = v.o.ratio;
      s.worst_case = v.case_line;
    }
    s.worst_lse = std::max(s.worst_lse, v.lse.ratio);
    for (Worsts* w : features) w->add(v);
    if (!v.pass) {
      ++s.failures;
      for (Worsts* w : features) ++w->failures;
      std::printf("FAIL\n%s\n", v.report().c_str());
    } else if (verbose) {
      std::printf("%s  O %.3f  LSE %.3f  %s\n", v.outcome == Outcome::kPass ? "pass" : to_string(v.outcome), v.o.ratio,
                  v.lse.ratio, v.case_line.c_str());
    }
  }
  progress.update(static_cast<int64_t>(cases.size()), static_cast<int64_t>(cases.size()));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::printf("\nkernel paths run:\n");
  for (const auto& [name, count] : paths) std::printf("  %-40s %lld cases\n", name.c_str(), static_cast<long long>(count));
  std::printf("\n| dtype | cases | failed | outside domain | rows checked | elements | informative O checks | "
              "cases with fully masked rows | worst O err/bound | worst LSE err/bound | max O err (eps) |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  int64_t failures = 0;
  for (const auto& [dtype, s] : summary) {
    failures += s.failures;
    const double informative = s.o_claims > 0 ? 100.0 * double(s.o_informative) / double(s.o_claims) : 100.0;
    std::printf("| %s | %lld | %lld | %lld | %lld | %lld | %.1f%% | %lld | %.4f | %.4f | %.2f |\n", to_string(dtype),
                static_cast<long long>(s.cases), static_cast<long long>(s.failures),
                static_cast<long long>(s.outside_domain), static_cast<long long>(s.rows),
                static_cast<long long>(s.elements), informative, static_cast<long long>(s.fully_masked_cases), s.worst_o,
                s.worst_lse, s.max_err_eps);
  }
  std::printf("(max O err (eps): the largest O error in units of eps * max(A_k, the dtype's smallest normal), A_k = "
              "sum_j p_j |v_jk|; a score's rounding grows with its magnitude, so rows of large logits err by many eps "
              "inside their bound: the ratio to the bound is the check)\n");
  for (const auto& [dtype, s] : summary) {
    if (!s.worst_case.empty()) std::printf("worst O case %s: %s\n", to_string(dtype), s.worst_case.c_str());
  }
  // The same per feature: the cases with a window, a softcap, a sink, sequences, a paged cache, split runs (a case
  // with several counts in each).
  std::printf("\n| dtype | feature | cases | failed | worst O err/bound | worst LSE err/bound |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const auto& [dtype, s] : summary) {
    for (const auto& [name, member] : kFeatures) {
      const Worsts& w = s.*member;
      std::printf("| %s | %s | %lld | %lld | %.4f | %.4f |\n", to_string(dtype), name, static_cast<long long>(w.cases),
                  static_cast<long long>(w.failures), w.worst_o, w.worst_lse);
    }
  }
  for (const auto& [dtype, s] : summary) {
    for (const auto& [name, member] : kFeatures) {
      const Worsts& w = s.*member;
      if (!w.worst_case.empty()) std::printf("worst O case %s %s: %s\n", to_string(dtype), name, w.worst_case.c_str());
    }
  }
  // The backward section: the generated grad=1 cases (or the grad=1 lines of --cases), forward then backward on the
  // backend, judged by judge_backward.
  struct BackwardSummary {
    int64_t cases = 0, failures = 0, rejected = 0, unsupported = 0, claims = 0, informative = 0, tensor_core = 0;
    int64_t dropout = 0;
    int64_t unclaimed = 0;  // dQ/dK/dV elements outside the error model's domain (no claim, error-model §10.5)
    double worst_dq = 0, worst_dk = 0, worst_dv = 0, worst_dsink = 0;
    double worst_rms = 0;  // the statistical check's worst ratio over dQ, dK, dV
    std::string worst_case;
    double worst = -1;
  };
  std::map<DType, BackwardSummary> backward_summary;
  std::vector<Case> grad_cases;
  int64_t grad_refused = 0;  // grad=1 lines of --cases the forward section refused
  if (!cases_file.empty()) {
    for (size_t i = 0; i < cases.size(); ++i) {
      if (!cases[i].grad) continue;
      if (forward_refused[i]) {
        ++grad_refused;
      } else {
        grad_cases.push_back(cases[i]);
      }
    }
  } else if (!subject || subject->backward()) {
    // On a subject: inside its forward's capabilities, then without what its backward leaves out; none where it takes
    // no such case (a dtype its backward declares no class for, a dropout without backward_dropout).
    const auto add = [&](const Case& g) {
      if (!subject) {
        grad_cases.push_back(g);
        return;
      }
      std::optional<Case> c = subject->supports(g).ok() ? std::optional<Case>(g) : fit_to(*subject, g);
      if (!c) return;
      if (c->sink && !subject->backward()->sink) c->sink.reset();
      if (!c->seqs.empty() && !subject->backward()->sequences) {
        c->seqs.clear();
        c->poison = Poison::kNaN;
      }
      if (!subject->supports_backward(*c).ok()) return;
      c->subject = subject->name();
      grad_cases.push_back(*c);
    };
    for (const DTypeInfo& row : kDTypes) {
      if (row.dtype == DType::kF8E4M3) continue;  // forward-only (can_implement_backward)
      for (const Case& g : backward_cases(row.dtype, backward_per_dtype, seed + 5000)) add(g);
    }
    for (const Case& g : dropout_grad_cases) add(g);
  }
  Outcome backward_outcome = Outcome::kPass;
  // After a stop signal or a lost CUDA context the grad=1 cases are not run either.
  if (stop_signal != 0 || not_run > 0) not_run += static_cast<int64_t>(grad_cases.size());
  if (!grad_cases.empty() && not_run == 0) {
    std::printf("\nbackward pass: %zu grad=1 cases%s\n", grad_cases.size(),
                grad_refused > 0 ? (" (" + std::to_string(grad_refused) + " more refused above)").c_str() : "");
    for (const Case& c : grad_cases) {
      if (stop_before(static_cast<int64_t>(grad_cases.size()) - (&c - grad_cases.data()), "grad=1 cases")) break;
      BackwardSummary& b = backward_summary[c.dtype];
      ++b.cases;
      HostInputs inputs;
      Status st = make_inputs(c, &inputs, memory_cap);
      BackwardVerdict v;
      try {
        if (st.ok()) {
          v = judge_backward(c, inputs,
                             subject ? run_backward_case(inputs, *subject) : run_backward_case(inputs, backend));
        }
      } catch (const std::bad_alloc&) {
        st = allocation_refusal("the case's run and judgement");
      }
      if (!st.ok()) {  // v as constructed: nothing of a run
        v.pass = false;
        v.outcome = outcome_of(st.code());
        v.reason = st.message();
        v.case_line = format_case(c);
      }
      // A refusal (the inputs or the run rejected or unsupported) is counted as such, not as a failure. A subject's
      // (its backward declines a case its declaration let through, as SDPA's backends do) is not held against it, as
      // the forward's unsupported cases are not; flashcheck's kernels serve every case, so theirs sets the outcome.
      if (v.outcome == Outcome::kUnsupported || v.outcome == Outcome::kRejected) {
        ++(v.outcome == Outcome::kRejected ? b.rejected : b.unsupported);
        if (!subject || v.outcome == Outcome::kRejected) backward_outcome = most_severe(backward_outcome, v.outcome);
        std::printf("%s (backward)\n%s\n", to_string(v.outcome), v.report().c_str());
        continue;
      }
      backward_outcome = most_severe(backward_outcome, v.outcome);
      if (v.path == ComputePath::kTensorCore) ++b.tensor_core;
      if (c.dropout > 0.0f) ++b.dropout;
      if (!v.pass) {
        ++b.failures;
        ++failures;
        std::printf("FAIL (backward)\n%s\n", v.report().c_str());
      } else if (verbose) {
        std::printf("pass  dQ %.3f  dK %.3f  dV %.3f  RMS %.3f  %s\n", v.dq.ratio, v.dk.ratio, v.dv.ratio, v.worst_rms(),
                    v.case_line.c_str());
      }
      for (const BackwardVerdict::Informative* info : {&v.dq_info, &v.dk_info, &v.dv_info}) {
        b.claims += info->claims;
        b.informative += info->informative;
        b.unclaimed += info->unclaimed;
      }
      b.worst_dq = std::max(b.worst_dq, v.dq.ratio);
      b.worst_dk = std::max(b.worst_dk, v.dk.ratio);
      b.worst_dv = std::max(b.worst_dv, v.dv.ratio);
      b.worst_dsink = std::max(b.worst_dsink, v.dsink.ratio);
      b.worst_rms = std::max(b.worst_rms, v.worst_rms());
      const double worst = std::max({v.dq.ratio, v.dk.ratio, v.dv.ratio, v.dsink.ratio});
      if (worst > b.worst) {
        b.worst = worst;
        b.worst_case = v.case_line;
      }
    }
    std::printf("\n| dtype | backward cases | rejected | unsupported | on tensor cores | with dropout | failed | informative "
                "dQ/dK/dV checks | worst dQ err/bound | worst dK err/bound | worst dV err/bound | worst dsink err/bound | "
                "worst RMS ratio (threshold %g) |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
                kBackwardRmsThreshold);
    for (const auto& [dtype, b] : backward_summary) {
      const double informative = b.claims > 0 ? 100.0 * double(b.informative) / double(b.claims) : 100.0;
      std::printf("| %s | %lld | %lld | %lld | %lld | %lld | %lld | %.1f%% | %.4f | %.4f | %.4f | %.4f | %.4f |\n",
                  to_string(dtype), static_cast<long long>(b.cases), static_cast<long long>(b.rejected),
                  static_cast<long long>(b.unsupported),
                  static_cast<long long>(b.tensor_core), static_cast<long long>(b.dropout),
                  static_cast<long long>(b.failures), informative, b.worst_dq, b.worst_dk, b.worst_dv, b.worst_dsink,
                  b.worst_rms);
    }
    for (const auto& [dtype, b] : backward_summary) {
      if (!b.worst_case.empty()) std::printf("worst backward case %s: %s\n", to_string(dtype), b.worst_case.c_str());
      if (b.unclaimed > 0) {
        std::printf("%s: %lld dQ/dK/dV elements without a claim (%s)\n", to_string(dtype),
                    static_cast<long long>(b.unclaimed), BackwardVerdict::kNoClaim);
      }
    }
  }
  std::array<int64_t, kOutcomeCount> counts{};
  // A subject is judged inside its capabilities: cases outside them are counted, not held against it, so a narrow
  // subject that passed everything it ran passes ("PASS within capabilities"), and one that ran nothing is
  // UNSUPPORTED. flashcheck's own kernel serves every valid case: an unsupported one counts.
  Outcome overall = Outcome::kPass;
  int64_t ran = 0;
  for (const CaseRecord& r : records) {
    ++counts[static_cast<size_t>(r.outcome)];
    if (r.outcome != Outcome::kUnsupported) ++ran;
    if (!subject || r.outcome != Outcome::kUnsupported) overall = most_severe(overall, r.outcome);
  }
  if (ran == 0) overall = Outcome::kUnsupported;  // nothing ran, nothing passed
  overall = most_severe(overall, backward_outcome);
  const bool within_capabilities =
      subject && overall == Outcome::kPass && counts[static_cast<size_t>(Outcome::kUnsupported)] > 0;
  const std::string verdict_word = within_capabilities ? "PASS within capabilities" : to_string(overall);
  std::printf("\n%s: %lld of %zu cases failed, %lld rejected, %lld unsupported, %lld outside the domain (%.1f s)%s\n",
              stop_signal != 0 ? ("INCOMPLETE (" + verdict_word + " so far)").c_str() : verdict_word.c_str(),
              static_cast<long long>(failures),
              records.size(),
              static_cast<long long>(counts[static_cast<size_t>(Outcome::kRejected)]),
              static_cast<long long>(counts[static_cast<size_t>(Outcome::kUnsupported)]),
              static_cast<long long>(counts[static_cast<size_t>(Outcome::kOutsideDomain)]), seconds,
              not_run == 0 ? ""
              : stop_signal != 0
                  ? ("; stopped by " + std::string(signal_name(stop_signal)) + ", " + std::to_string(not_run) +
                     " cases not run").c_str()
                  : ("; " + std::to_string(not_run) + " not run: the CUDA context was lost").c_str());
  if (!backward_summary.empty()) {
    int64_t backward_failed = 0, backward_total = 0, backward_rejected = 0, backward_unsupported = 0;
    for (const auto& [dtype, b] : backward_summary) {
      backward_failed += b.failures;
      backward_total += b.cases;
      backward_rejected += b.rejected;
      backward_unsupported += b.unsupported;
    }
    std::printf("backward: %lld of %lld grad=1 cases failed (counted in the failures above)%s%s\n",
                static_cast<long long>(backward_failed), static_cast<long long>(backward_total),
                backward_rejected > 0 ? (", " + std::to_string(backward_rejected) + " rejected").c_str() : "",
                backward_unsupported > 0 ? (", " + std::to_string(backward_unsupported) + " unsupported").c_str() : "");
  }
  if (!json_path.empty()) {
    const bool lse_written = !subject || subject->descriptor().capabilities.lse != 0;
    const nlohmann::json doc = report_json(backend_text, subject ? subject->name() : "", lse_written, seconds, not_run,
                                           stop_signal, overall,
                                           counts, summary, paths, records);
    nlohmann::json with_backward = doc;
    for (const auto& [dtype, b] : backward_summary) {
      with_backward["backward"][to_string(dtype)] = {{"cases", b.cases},       {"tensor_core", b.tensor_core},
                                                     {"dropout", b.dropout},
                                                     {"failures", b.failures}, {"rejected", b.rejected},
                                                     {"unsupported", b.unsupported},
                                                     {"claims", b.claims},     {"informative", b.informative},
                                                     {"unclaimed", b.unclaimed},
                                                     {"worst_dq", b.worst_dq}, {"worst_dk", b.worst_dk},
                                                     {"worst_dv", b.worst_dv}, {"worst_dsink", b.worst_dsink},
                                                     {"worst_rms", b.worst_rms}, {"worst_case", b.worst_case}};
    }
    std::ofstream out(json_path);
    out << with_backward.dump(1) << "\n";
    out.close();
    if (!out) {
      std::fprintf(stderr, "flashcheck-report: cannot write %s\n", excerpt(json_path).c_str());
      return kExitCantCreate;
    }
    std::printf("JSON: %s\n", json_path.c_str());
  }
  if (stop_signal != 0) return exit_interrupted(stop_signal);
  return exit_code(overall);
}
