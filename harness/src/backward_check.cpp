// run_backward_case() and judge_backward() (backward_check.h). The runner keeps every buffer the backward pass reads
// or writes as an image, kGuardBytes | payload | kGuardBytes (runner_internal.h): O and LSE rebuilt in the kernel's
// layout from the forward's decoded outputs (decoding and encoding a dtype value are exact, so the backward reads the
// forward's bits), dQ, dK, dV and dsink poisoned. The host model writes the payloads in place; the GPU round-trips
// the images (backward_on_gpu, runner_gpu.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "flashcheck/backward.h"
#include "flashcheck/backward_check.h"
#include "flashcheck/dtype.h"
#include "flashcheck/error_model.h"
#include "flashcheck/gradient.h"
#include "flashcheck/oracle_bridge.h"
#include "runner_internal.h"

namespace flashcheck {
namespace {

using detail::BackwardImages;
using detail::payload;

// Element offsets (in elements) of a case's Q-like rows (Q, O, dO, dQ: dense or packed over cu_seqlens_q) and
// K-like key slots (K, V, dK, dV: dense or packed over cu_seqlens_k).
struct Rows {
  const HostInputs& in;
  int64_t q_rows(int64_t b) const {
    return in.cu_seqlens_q.empty() ? in.params.seqlen_q : in.cu_seqlens_q[b + 1] - in.cu_seqlens_q[b];
  }
  int64_t keys(int64_t b) const { return in.seqlens_k.empty() ? in.params.seqlen_k : in.seqlens_k[static_cast<size_t>(b)]; }
  int64_t slots(int64_t b) const {
    return in.cu_seqlens_k.empty() ? in.params.seqlen_k : in.cu_seqlens_k[b + 1] - in.cu_seqlens_k[b];
  }
  int64_t q_offset(const Strides& s, int64_t b, int64_t h, int64_t i) const {
    return in.cu_seqlens_q.empty() ? b * s.batch + h * s.head + i * s.row : h * s.head + (in.cu_seqlens_q[b] + i) * s.row;
  }
  int64_t k_offset(const Strides& s, int64_t b, int64_t h, int64_t j) const {
    return in.cu_seqlens_k.empty() ? b * s.batch + h * s.head + j * s.row : h * s.head + (in.cu_seqlens_k[b] + j) * s.row;
  }
  int64_t lse_row(int64_t b, int64_t h, int64_t i) const {
    const Params& p = in.params;
    return in.cu_seqlens_q.empty() ? (b * p.heads_q + h) * p.seqlen_q + i : h * p.total_q + in.cu_seqlens_q[b] + i;
  }
};

// Element `at` of a dtype payload: the dtype table's codec (exact both ways for the dtype's values).
double load(DType dtype, const uint8_t* base, int64_t at) {
  const int64_t size = dtype_size(dtype);
  uint32_t bits = 0;
  std::memcpy(&bits, base + at * size, static_cast<size_t>(size));
  return decode_dtype(dtype, bits);
}
void store(DType dtype, uint8_t* base, int64_t at, double x) {
  const uint32_t bits = encode_dtype(dtype, x);
  std::memcpy(base + at * dtype_size(dtype), &bits, static_cast<size_t>(dtype_size(dtype)));
}

// Bytes, not values: a NaN sink equals itself here.
bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Guard | `payload_bytes` | guard, the payload poisoned element by element in `dtype` when it is an output.
std::vector<uint8_t> guarded(int64_t payload_bytes, const DType* poison_dtype = nullptr) {
  std::vector<uint8_t> image(static_cast<size_t>(2 * kGuardBytes + payload_bytes), kCanaryByte);
  if (poison_dtype != nullptr) {
    const int64_t esize = dtype_size(*poison_dtype);
    for (int64_t at = 0; at + esize <= payload_bytes; at += esize) detail::store_poison(*poison_dtype, payload(image) + at);
  }
  return image;
}

bool guards_intact(const std::vector<uint8_t>& image) {
  const int64_t size = static_cast<int64_t>(image.size());
  return image.empty() ||
         (detail::first_damage(image, 0, kGuardBytes) < 0 && detail::first_damage(image, size - kGuardBytes, size) < 0);
}

// A gradient image in the kernel's layout: its elements decoded by offset, and which of them a valid row or key slot
// covers (`seen`, marked by the caller), so that the rest can be checked to still hold the poison.
struct Decoder {
  DType dtype;
  int64_t columns;
  const std::vector<uint8_t>& image;
  std::vector<char> seen;
  Decoder(DType dt, int64_t cols, const std::vector<uint8_t>& img)
      : dtype(dt), columns(cols), image(img),
        seen(img.size() > 2 * kGuardBytes ? (img.size() - 2 * kGuardBytes) / static_cast<size_t>(dtype_size(dt)) : 0, 0) {}
  double value(int64_t offset) const { return load(dtype, image.data() + kGuardBytes, offset); }
  bool unwritten(int64_t offset) const {
    return detail::is_poison(dtype, image.data() + kGuardBytes + offset * dtype_size(dtype));
  }
  // Elements of the payload no valid row or slot covers still hold the poison.
  bool padding_untouched() const {
    for (size_t e = 0; e < seen.size(); ++e) {
      if (seen[e] == 0 && !unwritten(static_cast<int64_t>(e))) return false;
    }
    return true;
  }
};

}  // namespace

BackwardOutputs run_backward_case(const HostInputs& inputs, Backend backend, const BackwardRunOptions& options) {
  BackwardOutputs out;
  if (inputs.d_o.empty() && inputs.o_elements > 0) {
    out.status = {StatusCode::kInvalidArgument, "run_backward_case: the inputs carry no dO (the case needs grad=1)"};
    return out;
  }
  RunOptions forward_options;
  forward_options.model.defect = options.defect;
  forward_options.stream = options.stream;
  out.forward = options.forward_run ? options.forward_run(inputs) : run_case(inputs, backend, forward_options);
  if (!out.forward.status.ok()) {
    out.status = out.forward.status;
    return out;
  }
  HostInputs in = inputs;  // the copy the backward reads: its bytes are compared with the inputs' after the call
  in.bind();
  const Params& p = in.params;
  const Rows layout{in};
  const int64_t esize = dtype_size(p.dtype), dim = p.head_dim, dim_v = value_head_dim(p);
  const int64_t lse_rows = in.cu_seqlens_q.empty() ? p.batch * p.heads_q * p.seqlen_q : p.heads_q * p.total_q;

  // The forward's O and LSE in the kernel's layout.
  BackwardImages images;
  images.o = guarded(in.o_padded * esize);
  images.lse = guarded(lse_rows * int64_t{sizeof(float)});
  for (int64_t e = 0; e < in.o_padded; ++e) {
    store(p.dtype, payload(images.o), e, std::nan(""));
  }
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      for (int64_t i = 0; i < layout.q_rows(b); ++i) {
        const int64_t canonical = (b * p.heads_q + h) * p.seqlen_q + i;
        const int64_t at = layout.q_offset(p.o_stride, b, h, i);
        for (int64_t c = 0; c < dim_v; ++c) {
          store(p.dtype, payload(images.o), at + c, out.forward.o[static_cast<size_t>(canonical * dim_v + c)]);
        }
        const float lse = out.forward.lse[static_cast<size_t>(canonical)];
        std::memcpy(payload(images.lse) + layout.lse_row(b, h, i) * int64_t{sizeof(float)}, &lse, sizeof(float));
      }
    }
  }
  const std::vector<uint8_t> o_before = images.o, lse_before = images.lse;
  const DType f32 = DType::kF32;
  images.dq = guarded(static_cast<int64_t>(in.q.size()), &p.dtype);
  images.dk = guarded(static_cast<int64_t>(in.k.size()), &p.dtype);
  images.dv = guarded(static_cast<int64_t>(in.v.size()), &p.dtype);
  if (!in.sink.empty()) images.dsink = guarded(p.heads_q * int64_t{sizeof(float)}, &f32);

  BackwardParams bp = make_backward_params(p);
  bp.forward.o = payload(images.o);
  bp.forward.lse = reinterpret_cast<float*>(payload(images.lse));
  bp.d_o = in.d_o.empty() ? nullptr : in.d_o.data();
  bp.dq = payload(images.dq);
  bp.dk = payload(images.dk);
  bp.dv = payload(images.dv);
  bp.dsink = reinterpret_cast<float*>(payload(images.dsink));
  bp.deterministic = options.deterministic;
  std::vector<const char*> changed;
  if (backend == Backend::kHostModel) {
    HostModelOptions model;
    model.defect = options.defect;
    if (options.backward_call) out.path = options.path;
    out.status = options.backward_call ? options.backward_call(bp, nullptr) : run_backward_host_model(bp, model);
    const std::pair<const char*, bool> compared[] = {
        {"q", in.q != inputs.q},     {"k", in.k != inputs.k},       {"v", in.v != inputs.v},
        {"d_o", in.d_o != inputs.d_o}, {"sink", !same_bytes(in.sink, inputs.sink)}, {"o", images.o != o_before},
        {"lse", images.lse != lse_before}};
    for (const auto& [name, differs] : compared) {
      if (differs) changed.push_back(name);
    }
  } else {
    out.path = options.backward_call ? options.path : backward_path(bp);
    out.status = detail::backward_on_gpu(in, bp, &images, options.stream, &changed, options.backward_call);
    if (images.o != o_before) changed.push_back("o");
    if (images.lse != lse_before) changed.push_back("lse");
  }
  if (!out.status.ok()) return out;
  if (!changed.empty()) {
    out.inputs_unchanged = false;
    out.modified_input = changed.front();
  }

  // Decode, count the unwritten, check the tails and the padding.
  const auto note_damage = [&](const char* buffer) {
    if (out.canaries_intact) out.damaged_buffer = buffer;
    out.canaries_intact = false;
  };
  const std::pair<const char*, const std::vector<uint8_t>*> all[] = {
      {"dq", &images.dq}, {"dk", &images.dk}, {"dv", &images.dv}, {"dsink", &images.dsink}};
  for (const auto& [name, image] : all) {
    if (!guards_intact(*image)) note_damage(name);
  }
  Decoder dq(p.dtype, dim, images.dq);
  out.dq.assign(static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q * dim), 0.0);
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      for (int64_t i = 0; i < layout.q_rows(b); ++i) {
        const int64_t at = layout.q_offset(p.q_stride, b, h, i);
        for (int64_t c = 0; c < dim; ++c) {
          dq.seen[static_cast<size_t>(at + c)] = 1;
          if (dq.unwritten(at + c)) ++out.unwritten;
          out.dq[static_cast<size_t>(((b * p.heads_q + h) * p.seqlen_q + i) * dim + c)] = dq.value(at + c);
        }
      }
    }
  }
  if (!dq.padding_untouched()) note_damage("dq padding");
  // batch = 0 or heads_q = 0 is the documented no-op (backward.h): dK and dV are not the call's to write, and
  // writing them breaks the contract.
  const bool no_op = p.batch * p.heads_q == 0;
  const auto decode_keys = [&](Decoder& d, const Strides& strides, std::vector<double>* canonical, const char* pad_name,
                               const char* no_op_name) {
    canonical->assign(static_cast<size_t>(p.batch * p.heads_kv * p.seqlen_k * d.columns), 0.0);
    if (no_op) {  // no element is seen: every one must still hold the poison
      if (!d.padding_untouched()) note_damage(no_op_name);
      return;
    }
    for (int64_t b = 0; b < p.batch; ++b) {
      for (int64_t h = 0; h < p.heads_kv; ++h) {
        for (int64_t j = 0; j < layout.slots(b); ++j) {
          const int64_t at = layout.k_offset(strides, b, h, j);
          for (int64_t c = 0; c < d.columns; ++c) {
            d.seen[static_cast<size_t>(at + c)] = 1;
            if (d.unwritten(at + c)) {
              ++out.unwritten;
              continue;
            }
            const double x = d.value(at + c);
            if (j < layout.keys(b)) {
              (*canonical)[static_cast<size_t>(((b * p.heads_kv + h) * p.seqlen_k + j) * d.columns + c)] = x;
            } else if (x != 0.0) {
              ++out.tail_nonzero;
            }
          }
        }
      }
    }
    if (!d.padding_untouched()) note_damage(pad_name);
  };
  Decoder dk(p.dtype, dim, images.dk), dv(p.dtype, dim_v, images.dv);
  decode_keys(dk, p.k_stride, &out.dk, "dk padding", "dk (written by a no-op call)");
  decode_keys(dv, p.v_stride, &out.dv, "dv padding", "dv (written by a no-op call)");
  if (!images.dsink.empty()) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      const uint8_t* at = payload(images.dsink) + h * int64_t{sizeof(float)};
      if (detail::is_poison(DType::kF32, at)) ++out.unwritten;
      float x;
      std::memcpy(&x, at, sizeof(float));
      out.dsink.push_back(x);
    }
  }
  return out;
}

namespace {

// One gradient tensor against the oracle: the worst ratio with its place (rows of `row_len` elements, rows
// numbered (b, h, i) by `heads` and `rows`), the count over 1.
void judge_tensor(const char* name, const std::vector<double>& got, const std::vector<double>& want,
                  const std::vector<double>& bound, int64_t heads, int64_t rows, int64_t row_len, Worst* worst,
                  BackwardVerdict::Informative* info, std::vector<std::string>* failures) {
  for (size_t at = 0; at < want.size(); ++at) {
    if (!(bound[at] < std::numeric_limits<double>::infinity())) {  // no claim (gradient_check)
      ++info->unclaimed;
      continue;
    }
    if (std::isfinite(want[at])) {
      ++info->claims;
      if (bound[at] < std::fabs(want[at])) ++info->informative;
    }
    const double ratio = oracle::error_ratio(got[at], want[at], bound[at], false);
    ++worst->checked;
    const bool over = !(ratio <= 1.0);
    if (over) ++worst->over;
    const double r = std::isnan(ratio) ? std::numeric_limits<double>::infinity() : ratio;
    if (worst->col < 0 || r > worst->ratio) {
      const int64_t element = static_cast<int64_t>(at), row = element / row_len;
      worst->ratio = r;
      worst->where = {row / (heads * rows), (row / rows) % heads, row % rows};
      worst->col = element % row_len;
      worst->got = got[at];
      worst->want = want[at];
      worst->bound = bound[at];
    }
  }
  if (worst->over > 0) {
    std::ostringstream line;
    line << name << ": " << worst->over << " of " << worst->checked << " elements over their bound; worst ratio "
         << worst->ratio << " at (" << worst->where.b << ", " << worst->where.h << ", " << worst->where.i << ") column "
         << worst->col << ": got " << worst->got << ", want " << worst->want << ", bound " << worst->bound;
    failures->push_back(line.str());
  }
}

constexpr double kFp32SmallestNormal = 0x1p-126;

// What rounding a value x to the dtype can move it by: u |x|, or half the subnormal spacing below the smallest normal
// (nothing for x = 0).
struct OutputRounding {
  double u = 0.0, half_subnormal = 0.0;
  double of(double x) const { return x == 0.0 ? 0.0 : std::max(u * std::fabs(x), half_subnormal); }
};

// The statistical check of one gradient tensor (backward_check.h, BackwardRms): rows of `row_len` elements.
BackwardRms rms_check(const char* name, const std::vector<double>& got, const std::vector<double>& exact,
                      const std::vector<double>& bound, const std::vector<double>& reference,
                      const std::vector<double>& magnitude, const std::vector<double>& noise,
                      const std::vector<double>* from_o, int64_t row_len, int64_t terms,
                      const OutputRounding& rounding, bool ds_in_dtype, std::vector<std::string>* failures) {
  // What flushing fp32 subnormals can take from an element: each of its `terms` summed products, 2^-126 apiece.
  const double flush = static_cast<double>(std::max<int64_t>(terms, 1)) * kFp32SmallestNormal;
  BackwardRms r;
  double kernel2 = 0.0, reference2 = 0.0, magnitude2 = 0.0, exact2 = 0.0;
  size_t previous = exact.size();  // the last pooled element
  for (size_t at = 0; at < exact.size(); ++at) {
    if (!std::isfinite(bound[at]) || !std::isfinite(exact[at]) || !std::isfinite(reference[at]) ||
        !std::isfinite(got[at])) {
      continue;
    }
    // An element whose noise reaches its magnitude (scores of 1e8, a saturated softcap) has no statistic: pooled, its
    // allowance would swamp every other element of the tensor. So has one whose magnitude lies within what flushing
    // its products' fp32 subnormals takes (subnormal K or dO): a kernel that flushes them (FTZ) may lose it whole,
    // within the bound's n 2^-126 underflow term, and a same-precision reference that keeps subnormals says nothing
    // about that.
    if ((noise[at] > 0.0 && kBackwardRmsScoreRoundings * noise[at] >= magnitude[at]) ||
        (magnitude[at] > 0.0 && magnitude[at] < flush)) {
      ++r.noisy_left_out;
      continue;
    }
    ++r.elements;
    const size_t row = at / static_cast<size_t>(row_len);
    const bool same_row = previous < exact.size() && previous / static_cast<size_t>(row_len) == row;
    if (!(same_row && exact[previous] == exact[at])) ++r.draws;
    previous = at;
    const double shift = from_o != nullptr ? (*from_o)[at] : 0.0;
    const double e_kernel = got[at] - exact[at] - shift;
    kernel2 += e_kernel * e_kernel;
    // A kernel that rounds dS to the dtype before its GEMMs (the tensor-core class) may lose a shift below that
    // rounding: the two dS of a row that cancel round alike (constant keys give dQ = 0 whatever D holds). It errs then
    // by up to the shift, where the shift stays within the dtype's rounding of the element's magnitude.
    const double absorbed = ds_in_dtype ? std::min(std::fabs(shift), rounding.u * magnitude[at]) : 0.0;
    const double e_reference = std::max({std::fabs(reference[at] - exact[at]), kBackwardRmsScoreRoundings * noise[at],
                                         rounding.of(shift), absorbed});
    reference2 += e_reference * e_reference;
    magnitude2 += magnitude[at] * magnitude[at];
    exact2 += exact[at] * exact[at];
  }
  if (r.elements == 0) return r;
  const double n = static_cast<double>(r.elements);
  r.kernel = std::sqrt(kernel2 / n);
  r.reference = std::sqrt(reference2 / n);
  r.floor = kBackwardRmsFloorRoundings * 0x1p-24 * std::sqrt(magnitude2 / n) +
            rounding.u * std::sqrt(exact2 / n) / std::sqrt(static_cast<double>(r.draws));
  const double allowed = r.reference + r.floor;
  r.ratio = r.kernel == 0.0 ? 0.0 : allowed > 0.0 ? r.kernel / allowed : std::numeric_limits<double>::infinity();
  if (!(r.ratio <= kBackwardRmsThreshold)) {
    std::ostringstream line;
    line << "RMS: " << name << "'s RMS error " << r.kernel << " is " << r.ratio
         << " times what the same-precision reference allows (reference RMS error " << r.reference << ", floor "
         << r.floor << ", " << r.elements << " elements; threshold " << kBackwardRmsThreshold
         << "): systematic precision loss";
    failures->push_back(line.str());
  }
  return r;
}

// The forward's LSE as the kernel read it, in the oracle's doubles (ForwardResult::lse).
std::vector<double> given_lse(const BackwardOutputs& outputs) {
  return {outputs.forward.lse.begin(), outputs.forward.lse.end()};
}

oracle::GradientCheck bounds_given(const HostInputs& inputs, const BackwardOutputs& outputs,
                                   const std::vector<double>& lse) {
  return oracle::gradient_check(inputs.problem(), inputs.d_o_exact, {outputs.forward.o, lse},
                                {to_oracle(outputs.path), to_oracle(inputs.params.dtype)});
}

}  // namespace

oracle::GradientCheck backward_bounds(const HostInputs& inputs, const BackwardOutputs& outputs) {
  return bounds_given(inputs, outputs, given_lse(outputs));
}

BackwardVerdict judge_backward(const Case& c, const HostInputs& inputs, const BackwardOutputs& outputs,
                               const oracle::GradientCheck* given) {
  BackwardVerdict v;
  Case shown = c;  // a subject's run names it, so that the line replays against it (as the forward verdict's does)
  if (shown.subject.empty()) shown.subject = outputs.forward.subject;
  v.case_line = format_case(shown);
  if (!outputs.status.ok()) {
    v.pass = false;
    v.outcome = outcome_of(outputs.status.code());
    v.reason = outputs.status.message();
    v.failures.push_back(std::string(to_string(v.outcome)) + ": " + v.reason);
    return v;
  }
  v.path = outputs.path;
  v.forward = judge(c, inputs, outputs.forward);
  if (!v.forward.pass) v.failures.push_back("forward: " + (v.forward.failures.empty() ? std::string("FAIL") : v.forward.failures.front()));
  const Params& p = inputs.params;
  const std::vector<double> lse = given_lse(outputs);  // the bounds' and the statistical check's
  const oracle::GradientCheck check = given != nullptr ? *given : bounds_given(inputs, outputs, lse);
  v.max_keys = check.max_keys;
  v.max_rows = check.max_rows;
  judge_tensor("dQ", outputs.dq, check.exact.dq, check.dq, p.heads_q, p.seqlen_q, p.head_dim, &v.dq, &v.dq_info, &v.failures);
  judge_tensor("dK", outputs.dk, check.exact.dk, check.dk, p.heads_kv, p.seqlen_k, p.head_dim, &v.dk, &v.dk_info, &v.failures);
  judge_tensor("dV", outputs.dv, check.exact.dv, check.dv, p.heads_kv, p.seqlen_k, value_head_dim(p), &v.dv, &v.dv_info,
               &v.failures);
  if (!check.exact.dsink.empty()) {
    judge_tensor("dsink", outputs.dsink, check.exact.dsink, check.dsink, p.heads_q, 1, 1, &v.dsink, &v.dsink_info, &v.failures);
  }
  // The statistical check against the same-precision reference, given the O and LSE the kernel read.
  const oracle::SamePrecisionGradient reference =
      oracle::same_precision_gradient(inputs.problem(), inputs.d_o_exact, {outputs.forward.o, lse}, check.exact.d,
                                      to_oracle(p.dtype));
  const DTypeInfo& info = *find_dtype(p.dtype);
  const OutputRounding rounding{oracle::unit_roundoff(to_oracle(p.dtype)),
                                std::ldexp(info.min_normal(), -info.significand_bits())};
  const bool ds_in_dtype = outputs.path == ComputePath::kTensorCore;
  // Terms summed per element, at most: dQ a row's keys, dK and dV a key's rows over its query-head group.
  const int64_t rows_per_key = p.seqlen_q * (p.heads_kv > 0 ? p.heads_q / p.heads_kv : 1);
  v.dq_rms = rms_check("dQ", outputs.dq, check.exact.dq, check.dq, reference.dq, reference.dq_magnitude,
                       reference.dq_noise, &reference.dq_from_o, p.head_dim, p.seqlen_k, rounding, ds_in_dtype,
                       &v.failures);
  v.dk_rms = rms_check("dK", outputs.dk, check.exact.dk, check.dk, reference.dk, reference.dk_magnitude,
                       reference.dk_noise, &reference.dk_from_o, p.head_dim, rows_per_key, rounding, ds_in_dtype,
                       &v.failures);
  v.dv_rms = rms_check("dV", outputs.dv, check.exact.dv, check.dv, reference.dv, reference.dv_magnitude,
                       reference.dv_noise, nullptr, value_head_dim(p), rows_per_key, rounding, ds_in_dtype, &v.failures);
  v.unwritten = outputs.unwritten;
  v.tail_nonzero = outputs.tail_nonzero;
  v.canaries_intact = outputs.canaries_intact;
  v.inputs_unchanged = outputs.inputs_unchanged;
  if (v.unwritten > 0) v.failures.push_back(std::to_string(v.unwritten) + " gradient elements never written");
  if (v.tail_nonzero > 0) v.failures.push_back(std::to_string(v.tail_nonzero) + " dK/dV elements of key slots past a sequence's keys are not 0");
  if (!v.canaries_intact) v.failures.push_back(std::string("guard damaged: ") + outputs.damaged_buffer);
  if (!v.inputs_unchanged) v.failures.push_back(std::string("input modified: ") + outputs.modified_input);
  v.pass = v.failures.empty();
  v.outcome = v.pass ? Outcome::kPass : Outcome::kFail;
  return v;
}

std::string BackwardVerdict::report() const {
  std::ostringstream r;
  r << "case: " << case_line << "\n";
  r << "verdict: " << to_string(outcome);
  if (!reason.empty()) r << " (" << reason << ")";
  r << "\n";
  if (!reason.empty()) return r.str();
  r << "forward: " << to_string(forward.outcome) << ", worst O error/bound " << forward.o.ratio << ", LSE " << forward.lse.ratio
    << "\n";
  // An element without a claim is named, so that a gradient the verdict leaves out is seen to be left out.
  const auto line = [&](const char* name, const Worst& w, const Informative& info) {
    if (w.checked == 0) {
      if (info.unclaimed > 0) r << name << ": no claim on any of its " << info.unclaimed << " elements (" << kNoClaim << ")\n";
      return;
    }
    r << name << ": worst error/bound " << w.ratio << " at (" << w.where.b << ", " << w.where.h << ", " << w.where.i
      << ") column " << w.col << " (got " << w.got << ", want " << w.want << ", bound " << w.bound << "); " << w.over
      << " of " << w.checked << " over; informative " << 100.0 * info.fraction() << "%";
    if (info.unclaimed > 0) r << "; " << info.unclaimed << " without a claim (" << kNoClaim << ")";
    r << "\n";
  };
  line("dQ", dq, dq_info);
  line("dK", dk, dk_info);
  line("dV", dv, dv_info);
  line("dsink", dsink, dsink_info);
  const auto rms_line = [&](const char* name, const BackwardRms& x) {
    if (x.elements == 0) return;
    r << " " << name << " " << x.ratio << " (RMS error " << x.kernel << ", reference " << x.reference << ", floor "
      << x.floor << ", " << x.elements << " elements)";
  };
  r << "RMS against the same-precision reference (threshold " << kBackwardRmsThreshold << "):";
  rms_line("dQ", dq_rms);
  rms_line("dK", dk_rms);
  rms_line("dV", dv_rms);
  r << "\n";
  r << "backward path: " << to_string(path) << "; sums: up to " << max_keys << " keys per dQ row, " << max_rows << " rows per dK/dV key\n";
  for (const std::string& f : failures) r << "  FAIL " << f << "\n";
  return r.str();
}

}  // namespace flashcheck
