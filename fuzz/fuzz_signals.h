// Coverage a GPU kernel cannot give libFuzzer: features the kernel (or the host model) and the verdict report,
// written into libFuzzer's extra counters (a uint8_t array in the section __libfuzzer_extra_counters, cleared
// by libFuzzer before every input and read after it). A counter's value is bucketed by libFuzzer
// (1, 2, 3, 4-7, 8-15, 16-31, 32-127, 128+), so counts are stored saturated at 255 and one-hot slots hold 1.
// Outside a libFuzzer binary the section is plain memory: recording is harmless and nothing reads it.
#pragma once

#include <cstdint>

#include "flashcheck/attention.h"
#include "flashcheck/backward_check.h"
#include "flashcheck/case.h"
#include "flashcheck/inputs.h"
#include "flashcheck/instrument.h"
#include "flashcheck/runner.h"
#include "flashcheck/verdict.h"

namespace flashcheck::fuzz {

// What ran: path x dtype x mask, softcap and sink, tile kinds (alone and per path), rescale buckets, from a run
// with RunOptions::count_tiles (the counters read as zero when the run recorded none).
void record_run(const Case& c, const RunOutputs& out);
// Special values present in Q, K, V (NaN, +inf, -inf, -0, subnormal of the dtype, above half the dtype's max)
// and in the sink (of fp32).
void record_specials(const Case& c, const HostInputs& inputs);
// log2 bucket of the worst error/bound ratio, overall and per check (O, LSE, m, l, LSE = m + ln l), and the
// verdict's shape (unconstrained rows, failure): inputs that push the error upward reach new buckets and stay in the
// corpus.
void record_verdict(const Verdict& verdict);
// The same for a backward verdict: the forward's, then one log2 bucket of the worst ratio per gradient (dQ, dK, dV,
// dsink), so inputs that push any gradient's error toward its bound stay in the corpus.
void record_backward_verdict(const BackwardVerdict& verdict);

// The one-hot bucket of a ratio: 0 for 0, 1..kRatioBuckets-3 for log2 from -kRatioLog2Floor upward,
// kRatioBuckets-2 for +inf, kRatioBuckets-1 for NaN.
inline constexpr int kRatioBuckets = 32;
inline constexpr int kRatioLog2Floor = 24;  // ratios below 2^-24 share bucket 1
int ratio_bucket(double ratio);

// The worst ratio over every check of the verdict (NaN if any ratio is NaN).
double worst_ratio(const Verdict& verdict);

}  // namespace flashcheck::fuzz
