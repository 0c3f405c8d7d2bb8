#include "check_one.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "finding.h"
#include "flashcheck/host_model.h"

namespace flashcheck::fuzz {
namespace {

// Refused inputs of a case line stay out of the corpus; a binary-decoded case is valid by construction.
constexpr int64_t kMaxInputBytes = int64_t{1} << 30;

uint32_t poison_bits(DType dtype) { return dtype == DType::kF32 ? kPoisonBits32 : kPoisonBits16; }

void poison(DType dtype, uint8_t* bytes, int64_t elements) {
  const int64_t size = dtype_size(dtype);
  const uint32_t bits = poison_bits(dtype);
  for (int64_t e = 0; e < elements; ++e) std::memcpy(bytes + e * size, &bits, static_cast<size_t>(size));
}

uint32_t load_bits(DType dtype, const uint8_t* p) {
  uint32_t bits = 0;
  std::memcpy(&bits, p, static_cast<size_t>(dtype_size(dtype)));
  return bits;
}

}  // namespace

int64_t o_buffer_elements(const Params& params) { return params.batch * params.q_stride.batch; }

void decode_outputs(const Params& params, const uint8_t* o_bytes, const float* lse, RunOutputs* out) {
  const int64_t size = dtype_size(params.dtype);
  const uint32_t poison = poison_bits(params.dtype);
  const int64_t rows = params.batch * params.heads_q * params.seqlen_q;
  out->o.assign(static_cast<size_t>(rows * params.head_dim), 0.0);
  out->lse.assign(lse, lse + rows);
  std::vector<bool> is_element(static_cast<size_t>(o_buffer_elements(params)), false);
  int64_t index = 0;
  for (int64_t b = 0; b < params.batch; ++b) {
    for (int64_t h = 0; h < params.heads_q; ++h) {
      for (int64_t i = 0; i < params.seqlen_q; ++i) {
        const int64_t row = b * params.o_stride.batch + h * params.o_stride.head + i * params.o_stride.row;
        for (int64_t d = 0; d < params.head_dim; ++d, ++index) {
          const uint32_t bits = load_bits(params.dtype, o_bytes + (row + d) * size);
          is_element[static_cast<size_t>(row + d)] = true;
          out->unwritten_o += bits == poison ? 1 : 0;
          out->o[static_cast<size_t>(index)] = decode_dtype(params.dtype, bits);
        }
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t bits;
    std::memcpy(&bits, lse + r, sizeof bits);
    out->unwritten_lse += bits == kPoisonBits32 ? 1 : 0;
  }
  // O's padding elements must still hold the poison.
  for (size_t e = 0; e < is_element.size(); ++e) {
    if (!is_element[e] && load_bits(params.dtype, o_bytes + static_cast<int64_t>(e) * size) != poison) {
      out->canaries_intact = false;
      out->damaged_buffer = "O padding";
      out->first_damaged_canary = static_cast<int64_t>(e) * size;
      break;
    }
  }
}

RunOutputs run_model_counted(const HostInputs& inputs, ModelDefect defect, KernelCounters* counters) {
  RunOutputs out;
  Params params = inputs.params;
  params.o_stride = params.q_stride;
  const int64_t rows = params.batch * params.heads_q * params.seqlen_q;
  std::vector<uint8_t> o(static_cast<size_t>(o_buffer_elements(params) * dtype_size(params.dtype)));
  poison(params.dtype, o.data(), o_buffer_elements(params));
  std::vector<float> lse(static_cast<size_t>(rows));
  poison(DType::kF32, reinterpret_cast<uint8_t*>(lse.data()), rows);
  out.row_m.assign(static_cast<size_t>(rows), 0.0f);
  out.row_l.assign(static_cast<size_t>(rows), 0.0f);
  params.o = o.data();
  params.lse = lse.data();

  HostModelOptions options;
  options.defect = defect;
  options.instrumentation.row_m = out.row_m.data();
  options.instrumentation.row_l = out.row_l.data();
  options.instrumentation.tile_kind_counts = counters->tile_kind_counts;
  options.instrumentation.rescale_buckets = counters->rescale_buckets;
  out.config = select_config(params);
  out.status = run_host_model(params, options);
  if (!out.status.ok()) return out;
  decode_outputs(params, o.data(), lse.data(), &out);
  return out;
}

int check_one(const TargetSpec& spec, const uint8_t* data, size_t size) {
  DecodeMode mode;
  const Case c = decode_case({data, size}, &mode);
  if (!within_limits(c, spec.limits)) return -1;
  HostInputs inputs;
  if (Status s = make_inputs(c, &inputs, kMaxInputBytes); !s.ok()) {
    if (mode == DecodeMode::kText) return -1;
    report_finding(
        spec.name, to_string(spec.backend), c,
        "case: " + format_case(c) + "\nmake_inputs refused a case the binary decoder produced: " + s.message());
  }
  record_specials(c, inputs);

  KernelCounters counters;
  const RunOutputs out = spec.run(inputs, &counters);
  // A case line parses whatever the kernel supports (hq % hkv != 0, d = 0, ...): the API's refusal of it is
  // correct behaviour, covered by fuzz_api, not a finding. Binary-decoded cases are valid by construction.
  // (The refusal is the run's own: the inputs carry no output buffers yet, so asking can_implement() here
  // refused every case line.)
  if (mode == DecodeMode::kText && (out.status.code() == StatusCode::kInvalidArgument ||
                                    out.status.code() == StatusCode::kUnsupported)) {
    return -1;
  }
  record_run(c, out.config, counters);
  if (!out.status.ok()) {
    report_finding(spec.name, to_string(spec.backend), c,
                   "case: " + format_case(c) + "\nthe " + std::string(to_string(spec.backend)) +
                       " backend failed on a valid case: " + out.status.message());
  }
  // The verdict also fails on the guards (unwritten outputs, damaged canaries, changed inputs).
  const Verdict verdict = judge(c, inputs, out, spec.judge);
  record_verdict(verdict);
  if (!verdict.pass) {
    char hash[32];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(inputs.hash()));
    report_finding(spec.name, to_string(spec.backend), c,
                   verdict.report() + "\ninputs hash (FNV-1a of q, k, v bytes): " + hash);
  }
  return 0;
}

}  // namespace flashcheck::fuzz
