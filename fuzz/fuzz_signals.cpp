// Counter layout: one array, each feature family at a fixed offset (kSlot* below), 64-byte aligned and a
// multiple of 8 bytes long because libFuzzer clears the section a machine word at a time.
#include "fuzz_signals.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "flashcheck/dtype.h"

namespace flashcheck::fuzz {
namespace {

constexpr int kPaths = 3, kDtypes = 3, kMasks = 5, kTensors = 4;  // tensors: q, k, v and the sink
enum SpecialKind : int {
  kSpecialNaN,
  kSpecialPosInf,
  kSpecialNegInf,
  kSpecialNegZero,
  kSpecialSubnormal,
  kSpecialNearMax,
  kSpecialKinds
};
constexpr int kChecks = 5;  // O, LSE, m, l, LSE = m + ln l

constexpr int kSlotConfig = 0;                                           // path x dtype x mask, one-hot
constexpr int kSlotTileKinds = kSlotConfig + kPaths * kDtypes * kMasks;  // count per tile kind
constexpr int kSlotPathTile = kSlotTileKinds + kTileKindCount;           // path x tile kind, count
constexpr int kSlotRescale = kSlotPathTile + kPaths * kTileKindCount;    // rows per rescale bucket, count
constexpr int kSlotSpecials = kSlotRescale + kRescaleBuckets;            // tensor x special kind, count
constexpr int kSlotWorst = kSlotSpecials + kTensors * kSpecialKinds;     // worst ratio bucket, one-hot
constexpr int kSlotPerCheck = kSlotWorst + kRatioBuckets;                // check x ratio bucket, one-hot
constexpr int kSlotVerdict = kSlotPerCheck + kChecks * kRatioBuckets;    // unconstrained rows, failures
constexpr int kSlotFeatures = kSlotVerdict + 2;                          // softcap, sink, one-hot
constexpr int kGradients = 4;                                            // dQ, dK, dV, dsink
constexpr int kSlotGradients = kSlotFeatures + 2;                        // gradient x ratio bucket, one-hot
constexpr int kSlotEnd = kSlotGradients + kGradients * kRatioBuckets;
constexpr int kCounterBytes = (kSlotEnd + 63) / 64 * 64;

alignas(64) __attribute__((section("__libfuzzer_extra_counters"), used)) uint8_t g_counters[kCounterBytes];

void add(int slot, uint64_t count) {
  const uint64_t sum = g_counters[slot] + count;
  g_counters[slot] = static_cast<uint8_t>(std::min<uint64_t>(sum, 255));
}

void record_specials_of(std::span<const double> values, DType dtype, int tensor) {
  // Smallest normal and largest finite value of the dtype.
  const double min_normal = find_dtype(dtype)->min_normal();
  const double max_finite = dtype_max(dtype);
  uint64_t counts[kSpecialKinds] = {};
  for (double x : values) {
    if (std::isnan(x))
      ++counts[kSpecialNaN];
    else if (std::isinf(x))
      ++counts[x > 0 ? kSpecialPosInf : kSpecialNegInf];
    else if (x == 0.0)
      counts[kSpecialNegZero] += std::signbit(x) ? 1 : 0;
    else if (std::fabs(x) < min_normal)
      ++counts[kSpecialSubnormal];
    else if (std::fabs(x) > 0.5 * max_finite)
      ++counts[kSpecialNearMax];
  }
  for (int kind = 0; kind < kSpecialKinds; ++kind) add(kSlotSpecials + tensor * kSpecialKinds + kind, counts[kind]);
}

}  // namespace

int ratio_bucket(double ratio) {
  if (std::isnan(ratio)) return kRatioBuckets - 1;
  if (std::isinf(ratio)) return kRatioBuckets - 2;
  if (ratio <= 0.0) return 0;
  const int log2 = std::ilogb(ratio);  // floor(log2(ratio)) for finite positive ratios
  return std::clamp(log2 + kRatioLog2Floor + 1, 1, kRatioBuckets - 3);
}

double worst_ratio(const Verdict& verdict) {
  double worst = 0.0;
  for (const Worst* w : {&verdict.o, &verdict.lse, &verdict.m, &verdict.l, &verdict.identity}) {
    if (std::isnan(w->ratio)) return w->ratio;
    worst = std::max(worst, w->ratio);
  }
  return worst;
}

void record_run(const Case& c, const RunOutputs& out) {
  const int path = std::clamp(static_cast<int>(out.config.path), 0, kPaths - 1);
  const int dtype = std::clamp(static_cast<int>(c.dtype), 0, kDtypes - 1);
  const int mask = std::clamp(static_cast<int>(c.mask), 0, kMasks - 1);
  add(kSlotConfig + (path * kDtypes + dtype) * kMasks + mask, 1);
  add(kSlotFeatures, c.softcap > 0 ? 1 : 0);
  add(kSlotFeatures + 1, c.sink ? 1 : 0);
  const auto count = [](const std::vector<uint64_t>& counts, int i) {
    return static_cast<size_t>(i) < counts.size() ? counts[static_cast<size_t>(i)] : uint64_t{0};
  };
  for (int kind = 0; kind < kTileKindCount; ++kind) {
    add(kSlotTileKinds + kind, count(out.tile_kind_counts, kind));
    add(kSlotPathTile + path * kTileKindCount + kind, count(out.tile_kind_counts, kind));
  }
  for (int bucket = 0; bucket < kRescaleBuckets; ++bucket) {
    add(kSlotRescale + bucket, count(out.rescale_buckets, bucket));
  }
}

void record_specials(const Case& c, const HostInputs& inputs) {
  record_specials_of(inputs.q_exact, c.dtype, 0);
  record_specials_of(inputs.k_exact, c.dtype, 1);
  record_specials_of(inputs.v_exact, c.dtype, 2);
  record_specials_of(inputs.sink_exact, DType::kF32, 3);  // fp32 values, judged by fp32's range
}

void record_verdict(const Verdict& verdict) {
  add(kSlotWorst + ratio_bucket(worst_ratio(verdict)), 1);
  int check = 0;
  for (const Worst* w : {&verdict.o, &verdict.lse, &verdict.m, &verdict.l, &verdict.identity}) {
    add(kSlotPerCheck + check * kRatioBuckets + ratio_bucket(w->ratio), 1);
    ++check;
  }
  add(kSlotVerdict, static_cast<uint64_t>(std::max<int64_t>(verdict.unconstrained_rows, 0)));
  add(kSlotVerdict + 1, verdict.pass ? 0 : 1);
}

void record_backward_verdict(const BackwardVerdict& verdict) {
  record_verdict(verdict.forward);
  int gradient = 0;
  for (const Worst* w : {&verdict.dq, &verdict.dk, &verdict.dv, &verdict.dsink}) {
    add(kSlotGradients + gradient * kRatioBuckets + ratio_bucket(w->ratio), 1);
    ++gradient;
  }
}

}  // namespace flashcheck::fuzz
