// Shared pieces of the properties (see checks.h).
#include "checks.h"

#include <rapidcheck.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <sstream>

#include "flashcheck/oracle_bridge.h"
#include "tier.h"

namespace flashcheck::properties {
namespace {

struct TensorRef {
  std::vector<uint8_t>* bytes;
  std::vector<double>* exact;
  Strides strides;
  int64_t heads, seqlen;
};

TensorRef tensor_ref(HostInputs& in, char tensor) {
  const Params& p = in.params;
  switch (tensor) {
    case 'q': return {&in.q, &in.q_exact, p.q_stride, p.heads_q, p.seqlen_q};
    case 'k': return {&in.k, &in.k_exact, p.k_stride, p.heads_kv, p.seqlen_k};
    default: return {&in.v, &in.v_exact, p.v_stride, p.heads_kv, p.seqlen_k};
  }
}

}  // namespace

HostInputs inputs_for(const Case& c) {
  HostInputs in;
  const Status st = make_inputs(c, &in);
  if (!st.ok()) RC_LOG() << "make_inputs: " << st.message() << "\n";
  RC_ASSERT(st.ok());
  return in;
}

RunOutputs run_backend(const HostInputs& inputs, bool instrument) {
  RunOptions options;
  options.instrument = instrument;
  options.model.defect = planted_defect();
  RunOutputs out = run_case(inputs, active_backend(), options);
  if (!out.status.ok()) RC_LOG() << "run_case on " << to_string(active_backend()) << ": " << out.status.message() << "\n";
  RC_ASSERT(out.status.ok());
  return out;
}

JudgeOptions judge_options() {
  JudgeOptions o;
  o.check_stats = true;
  if (active_backend() == Backend::kGpu) {
    // Large GPU problems: the oracle's cost is rows * seqlen_k * head_dim on one host core, so sample.
    o.full_check_limit = 256;
    o.random_rows = 24;
  } else {
    o.full_check_limit = 2048;
    o.random_rows = 32;
  }
  return o;
}

void assert_verdict(const Verdict& verdict) {
  if (!verdict.pass) RC_LOG() << verdict.report() << "\n";
  RC_ASSERT(verdict.pass);
}

double input_value(const HostInputs& in, char tensor, int64_t b, int64_t h, int64_t s, int64_t d) {
  const TensorRef t = tensor_ref(const_cast<HostInputs&>(in), tensor);
  return (*t.exact)[static_cast<size_t>(((b * t.heads + h) * t.seqlen + s) * in.params.head_dim + d)];
}

void set_input_value(HostInputs& in, char tensor, int64_t b, int64_t h, int64_t s, int64_t d, double value) {
  const DType dtype = in.params.dtype;
  const TensorRef t = tensor_ref(in, tensor);
  const uint32_t bits = encode_dtype(dtype, value);
  const double stored = decode_dtype(dtype, bits);
  RC_ASSERT(std::isnan(value) || stored == value);  // callers pass dtype values; a rounding here is a test bug
  const int64_t esize = dtype_size(dtype);
  const int64_t offset = (b * t.strides.batch + h * t.strides.head + s * t.strides.row + d) * esize;
  // Host byte order, as make_inputs stores it.
  std::memcpy(t.bytes->data() + offset, &bits, static_cast<size_t>(esize));
  (*t.exact)[static_cast<size_t>(((b * t.heads + h) * t.seqlen + s) * in.params.head_dim + d)] = stored;
}

ExactRow exact_row(const HostInputs& in, const KernelConfig& config, const oracle::RowRef& row) {
  ExactRow r;
  r.exact = oracle::compute_row(in.problem(), row, oracle::Tier::kFast);
  r.bound = oracle_bound(r.exact, in.params, config);
  return r;
}

std::vector<oracle::RowRef> rows_to_check(const HostInputs& in, const KernelConfig& config, uint64_t seed) {
  const JudgeOptions o = judge_options();
  return oracle::sample_rows(in.problem(), config.block_m, config.block_n, seed, o.full_check_limit, o.random_rows);
}

bool same_bits(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }
bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

std::string describe_row(const oracle::RowRef& r) {
  std::ostringstream os;
  os << "[b=" << r.b << ", h=" << r.h << ", i=" << r.i << "]";
  return os.str();
}

void assert_bit_identical(const std::string& what, const RunOutputs& a, const RunOutputs& b, const Params& p,
                          const std::vector<bool>* rows_to_compare) {
  RC_ASSERT(a.o.size() == b.o.size());
  RC_ASSERT(a.lse.size() == b.lse.size());
  const int64_t rows = p.batch * p.heads_q * p.seqlen_q;
  for (int64_t r = 0; r < rows; ++r) {
    if (rows_to_compare && !(*rows_to_compare)[static_cast<size_t>(r)]) continue;
    const oracle::RowRef ref{r / (p.heads_q * p.seqlen_q), (r / p.seqlen_q) % p.heads_q, r % p.seqlen_q};
    if (!same_bits(a.lse[static_cast<size_t>(r)], b.lse[static_cast<size_t>(r)])) {
      RC_LOG() << what << ": LSE differs at row " << describe_row(ref) << ": " << a.lse[static_cast<size_t>(r)]
               << " vs " << b.lse[static_cast<size_t>(r)] << "\n";
      RC_FAIL(what + ": LSE not bit-identical");
    }
    for (int64_t d = 0; d < p.head_dim; ++d) {
      const size_t i = static_cast<size_t>(r * p.head_dim + d);
      if (!same_bits(a.o[i], b.o[i])) {
        RC_LOG() << what << ": O differs at row " << describe_row(ref) << " col " << d << ": " << a.o[i] << " vs "
                 << b.o[i] << "\n";
        RC_FAIL(what + ": O not bit-identical");
      }
    }
  }
}

}  // namespace flashcheck::properties
