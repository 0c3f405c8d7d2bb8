// Property 10: the fp8 (e4m3) path (docs/design/fp8-forward.md). Its cases are f8e4m3 cases of every shape and
// feature the path serves (masks, windows, softcaps, sinks, GQA, unequal head dims, layouts, special values), with
// descales or without; O is bf16. They agree with the exact oracle within the fp8 bound and with the RMS check
// against the emulated reference; P never saturates, on rows built for it (the max rising tile after tile by just
// under 0.5, 1, 4 or 8 in log2 units); light keys keep their weight where they carry most of a row's (the P offset);
// power-of-two descales scale the scores and O exactly; inputs exact in both formats give O within both bounds of
// the bf16 path's; and the forward properties that take any case (memory safety, layouts, repeated runs, independent
// slices) hold on f8e4m3 cases: on the GPU tier against the fp8 kernel (sm_90a builds; tier.cpp skips them without
// it), on the host model against the path's own model, and on a subject that declares an fp8 path (fc_subject_fp8_v1).
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checks.h"
#include "flashcheck/dtype.h"
#include "flashcheck/kernel_facts.h"
#include "flashcheck/loaded_subject.h"
#include "generators.h"
#include "properties.h"
#include "replay.h"
#include "tier.h"

namespace flashcheck::properties {
namespace {

namespace gen = rc::gen;

// Why a replayed line is not an fp8 case, or "".
std::string outside_fp8(const Case& c) {
  if (c.dtype != DType::kF8E4M3) return "dtype: the property's cases are f8e4m3";
  if (c.page > 0 || c.splits > 1 || c.dropout != 0.0f || c.grad) {
    return "page: the fp8 path takes neither paged K/V, split-KV, dropout nor the backward pass";
  }
  return "";
}

// A descale distribution: none (1), a power of two (exact scaling), around 1, or far from it either way.
rc::Gen<std::optional<ValueSpec>> gen_descale() {
  const auto pow2 = gen::map(gen::inRange(-6, 7), [](int e) {
    return std::optional<ValueSpec>(ValueSpec{DistKind::kConst, std::ldexp(1.0, e), 1.0});
  });
  return gen::weightedOneOf<std::optional<ValueSpec>>({
      {2, gen::just(std::optional<ValueSpec>())},
      {2, pow2},
      {4, gen::just(std::optional<ValueSpec>(ValueSpec{DistKind::kUniform, 0.5, 2.0}))},
      {1, gen::element(std::optional<ValueSpec>(ValueSpec{DistKind::kUniform, 1e-3, 1e-2}),
                       std::optional<ValueSpec>(ValueSpec{DistKind::kUniform, 10.0, 100.0}))},
  });
}

// An f8e4m3 case from the options (gen_case with f8e4m3 alone), with a descale drawn on it; or the replayed line's.
Case fp8_case(CaseOptions o) {
  if (const Case* r = replay_case()) return *replayed_case(*r, outside_fp8(*r));
  o.dtypes = {DType::kF8E4M3};
  // Grouped heads in half the cases: a query head reads its K/V head's descales.
  o.min_group = *gen::element<int64_t>(1, 2).as("min group");
  Case c = *gen_case(o);
  // A subject's fp8 path without descales gets none (fc_subject_fp8_v1: descales).
  const LoadedSubject* subject = active_subject();
  if (subject == nullptr || subject->fp8()->descales) c.descale = *gen_descale().as("descale");
  note_coverage(!c.descale                              ? "descale=none"
                : c.descale->kind == DistKind::kConst   ? "descale=power-of-two"
                : c.descale->a >= 0.5 && c.descale->b <= 2.0 ? "descale=near-one"
                                                             : "descale=far");
  return c;
}

// The K/V tile of the fp8 path for the case's heads and head dims (the tile does not depend on the sequence lengths);
// a subject's, the tile its fp8 path declares for the case's head dim.
int64_t key_tile(const Case& c) {
  if (const LoadedSubject* subject = active_subject()) return subject->fp8_key_tile(c.head_dim);
  Case shape = c;
  shape.seqlen_q = shape.seqlen_k = 1;
  return kernel_config(case_params(shape)).block_n;
}

// One of `dims` for the head dim of a property's rows of two or more key tiles: on a subject, one whose rows of two
// tiles it takes (tier.cpp skips the property where none are).
int64_t gen_head_dim(std::vector<int64_t> dims) {
  if (const LoadedSubject* subject = active_subject()) {
    std::vector<int64_t> taken;
    for (const int64_t d : dims) {
      if (subject->takes_fp8_tiles(d, 2)) taken.push_back(d);
    }
    if (!taken.empty()) dims = taken;
  }
  return *gen::elementOf(dims).as("head_dim");
}

// A count of whole K/V tiles in [2, most], no more than a subject's seqlen_k limit holds.
int64_t gen_tiles(int64_t block_n, int64_t most) {
  if (const LoadedSubject* subject = active_subject(); subject != nullptr && subject->limits().seqlen_k_max > 0) {
    most = std::clamp<int64_t>(subject->limits().seqlen_k_max / block_n, 2, most);
  }
  return *gen::inRange<int64_t>(2, most + 1).as("K/V tiles");
}

// Rows whose max rises tile after tile by just under tau (log2 units): K a ramp along the keys, one e4m3 step of
// [1, 2) (1/8) per K/V tile at unit Q, the scale such that a step moves the scores by tau (1 - 2^-6). A kernel that
// lets its reference lag the max by tau or more (a lazy rescale) puts P at 2^(8 + tau) and beyond.
Case rising_max_case() {
  if (const Case* r = replay_case()) return *replayed_case(*r, outside_fp8(*r));
  Case c;
  c.dtype = DType::kF8E4M3;
  c.batch = 1;
  c.heads_kv = *gen::inRange<int64_t>(1, 3).as("heads_kv");
  c.heads_q = c.heads_kv * *gen::element<int64_t>(1, 2).as("group");
  c.head_dim = gen_head_dim({16, 32, 64, 128});
  const int64_t block_n = key_tile(c);
  const int64_t tiles = gen_tiles(block_n, 8);
  c.seqlen_k = tiles * block_n - *gen::element<int64_t>(0, 1, block_n / 2).as("keys short of whole tiles");
  c.seqlen_q = *gen::element<int64_t>(1, 2, 17).as("seqlen_q");
  c.mask = *gen::element(Mask::kNone, Mask::kCausalBottomRight).as("mask");
  const double tau = *gen::element(0.5, 1.0, 4.0, 8.0).as("tau (log2 units)");
  // x_j = scale log2(e) sum_d q k_j = scale log2(e) d k_j at q = 1: a step of 1/8 in k moves it by tau (1 - 2^-6).
  const double step = std::log2(std::exp(1.0)) * static_cast<double>(c.head_dim) / 8.0;  // at scale 1
  c.scale = static_cast<float>(tau * (1.0 - 0x1p-6) / step);
  c.q = ValueSpec{DistKind::kConst, 1.0, 1.0};
  c.k = ValueSpec{DistKind::kRamp, 1.0, 1.0 + static_cast<double>(tiles - 1) / 8.0};
  c.v = ValueSpec{DistKind::kNormal, 0.0, 1.0};
  c.seed = *gen::arbitrary<uint64_t>().as("seed");
  note_coverage("rise=" + std::to_string(tau));
  return c;
}

// Rows whose weight lies mostly on light keys: one heavy key (its row of K all ones, injected) among keys of score 0,
// gap log2 units above them, gap in (7, 12) and not an integer (a power of two is exact even among e4m3's subnormals).
// The light keys' weight relative to the heavy key's, 2^-gap, is below e4m3's normals (2^-6): cast without the offset
// it is a subnormal with up to half its value as error, or 0 below 2^-10; with the offset 2^8 it is a normal number.
// From the heavy key's tile on the light keys' reference is the heavy key (their tiles' max lies more than the
// reference slack below it), so thousands of them carry as much weight as it does.
Case light_keys_case() {
  if (const Case* r = replay_case()) return *replayed_case(*r, outside_fp8(*r));
  Case c;
  c.dtype = DType::kF8E4M3;
  c.batch = 1;
  c.heads_kv = 1;
  c.heads_q = *gen::element<int64_t>(1, 2).as("heads_q");
  c.head_dim = gen_head_dim({4, 8, 16});
  const int64_t block_n = key_tile(c);
  c.seqlen_k = gen_tiles(block_n, 8) * block_n - *gen::element<int64_t>(0, 1).as("short by");
  c.seqlen_q = *gen::element<int64_t>(1, 3).as("seqlen_q");
  const int64_t heavy = *gen::element<int64_t>(0, block_n - 1, block_n).as("heavy key");
  const double gap = *gen::element(7.3, 8.6, 9.6, 10.4, 11.5).as("gap (log2 units)");
  c.scale = static_cast<float>(gap / (std::log2(std::exp(1.0)) * static_cast<double>(c.head_dim)));
  c.q = ValueSpec{DistKind::kConst, 1.0, 1.0};
  c.k = ValueSpec{DistKind::kConst, 0.0, 1.0};
  c.v = ValueSpec{DistKind::kNormal, 0.0, 1.0};
  for (int64_t d = 0; d < c.head_dim; ++d) c.inject.push_back(Injection{'k', 0, 0, heavy, d, 1.0});
  c.seed = *gen::arbitrary<uint64_t>().as("seed");
  note_coverage("light-key-gap=" + std::to_string(gap));
  return c;
}

}  // namespace

void fp8_agrees_with_oracle() {
  const Case c = fp8_case(default_options());
  note_case(c);
  oracle_agreement(c);
}

// The forward properties that take any case, on f8e4m3 cases: O (bf16) and LSE fully written with canaries and
// inputs (descales included) intact, the layouts' bits equal, runs repeating bit for bit, slices independent.
void fp8_memory_safety() { memory_safety(fp8_case(default_options())); }
void fp8_layouts_agree_bit_for_bit() { layouts_agree_bit_for_bit(fp8_case(default_options())); }
void fp8_repeated_runs_are_bit_identical() { repeated_runs_are_bit_identical(fp8_case(default_options())); }
void fp8_batches_and_heads_are_independent() { batches_and_heads_are_independent(fp8_case(finite_options())); }

// Grouped heads (at least two K/V heads, two query heads each) with descales that differ between K/V heads: every
// query head must read its own K/V head's, which the oracle's problem states (Problem::descale_*).
void fp8_query_heads_read_their_kv_heads_descales() {
  CaseOptions o = finite_options();
  o.min_group = 2;
  Case c = fp8_case(o);
  if (replay_case() == nullptr) {
    if (c.heads_kv < 2) {
      c.heads_q = c.heads_q / c.heads_kv * 2;
      c.heads_kv = 2;
    }
    c.descale = ValueSpec{DistKind::kUniform, 0.5, 2.0};
    c.inject.clear();  // injections name heads of the drawn shape
  }
  RC_PRE(c.heads_kv >= 2 && c.heads_q >= 2 * c.heads_kv && c.descale.has_value());
  oracle_agreement(c);
}

void fp8_light_keys_keep_their_weight() {
  const Case c = light_keys_case();
  note_case(c);
  oracle_agreement(c);
}

void fp8_p_never_saturates() {
  const Case c = rising_max_case();
  note_case(c);
  oracle_agreement(c);
}

// O(descale = 2^a) = 2^a O(no descales, scale 4^a scale) and the same LSE, bit for bit: the descaled scale
// fl(fl(scale 2^a) 2^a) is 4^a scale exactly, and O's product by 2^a is exact wherever both Os and the product are
// normal bf16 values.
void fp8_power_of_two_descales_scale_exactly() {
  CaseOptions o = finite_options();
  Case c = fp8_case(o);
  const Case* replayed = replay_case();
  if (replayed == nullptr) {
    c.descale = ValueSpec{DistKind::kConst, std::ldexp(1.0, *gen::inRange(-4, 5).as("descale exponent")), 1.0};
  }
  RC_PRE(c.descale.has_value() && c.descale->kind == DistKind::kConst);
  const double two_a = c.descale->a;
  int exponent = 0;
  RC_PRE(std::frexp(two_a, &exponent) == 0.5);  // a power of two
  note_case(c);
  Case plain = c;
  plain.descale.reset();
  plain.property.clear();
  const double scaled = static_cast<double>(c.softmax_scale()) * two_a * two_a;
  RC_PRE(std::isfinite(static_cast<float>(scaled)) && static_cast<double>(static_cast<float>(scaled)) == scaled);
  plain.scale = static_cast<float>(scaled);
  const HostInputs in = inputs_for(c), in_plain = inputs_for(plain);
  const RunOutputs a = run_backend(in), b = run_backend(in_plain);
  const Params& p = in.params;
  const double bf16_min = find_dtype(DType::kBF16)->min_normal();
  int64_t compared = 0;
  for (size_t e = 0; e < a.o.size(); ++e) {
    const double want = two_a * b.o[e];
    // Where either O or the exact product 2^a O lies below bf16's normals, one rounding is coarser than the other
    // (or underflows to 0 alone): a normal O scaled into the subnormals rounds there, even up to the least normal.
    const double smaller = std::fmin(std::fmin(std::fabs(a.o[e]), std::fabs(b.o[e])), std::fabs(want));
    if (smaller < bf16_min && !(a.o[e] == 0.0 && b.o[e] == 0.0)) continue;
    if (std::isfinite(want) && std::fabs(want) > dtype_max(DType::kBF16)) continue;
    ++compared;
    if (!same_bits(a.o[e], want)) {
      RC_LOG() << "O element " << e << ": " << a.o[e] << " with descales " << two_a << ", " << b.o[e] << " * " << two_a
               << " = " << want << " without them\n";
      RC_FAIL("power-of-two descales do not scale O exactly");
    }
  }
  for (size_t r = 0; r < a.lse.size(); ++r) {
    if (!same_bits(a.lse[r], b.lse[r])) {
      RC_LOG() << "LSE row " << r << ": " << a.lse[r] << " with descales, " << b.lse[r] << " without\n";
      RC_FAIL("power-of-two descales change LSE");
    }
  }
  RC_LOG() << compared << " of " << a.o.size() << " O elements compared (" << value_head_dim(p) << " columns)\n";
}

// Inputs exact in e4m3 and in bf16 (every e4m3 value is a bf16 value), no descales: O of the fp8 path within the sum
// of both paths' bounds of the bf16 path's O, LSE likewise.
void fp8_agrees_with_bf16_on_exact_inputs() {
  Case c = fp8_case(finite_options());
  if (replay_case() == nullptr) c.descale.reset();
  RC_PRE(!c.descale.has_value());
  note_case(c);
  Case wide = c;
  wide.dtype = DType::kBF16;
  wide.property.clear();
  const HostInputs in = inputs_for(c);
  HostInputs in_wide = inputs_for(wide);
  const Params& p = in.params;
  for (char tensor : {'q', 'k', 'v'}) {
    for_each_input_element(p, tensor, [&](int64_t b, int64_t h, int64_t s, int64_t d) {
      set_input_value(in_wide, tensor, b, h, s, d, input_value(in, tensor, b, h, s, d));
    });
  }
  // Two paths (the configs' names differ): within the sum of both runs' bounds, non-finite where the exact row is.
  assert_same_kernel_bits_or_within_bounds("the fp8 path vs the bf16 path on the same values", in, run_backend(in),
                                           in_wide, run_backend(in_wide), c.seed);
}

}  // namespace flashcheck::properties
