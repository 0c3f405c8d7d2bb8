// Translation from the kernel's types to the oracle's (oracle_bridge.h). Each switch names every enumerator,
// so a new mask, dtype or compute path fails to compile (-Wswitch) until it is translated here; values out of
// range are a caller's bug and throw.
#include "flashcheck/oracle_bridge.h"

#include <stdexcept>
#include <string>

namespace flashcheck {

oracle::Format to_oracle(DType dtype) {
  switch (dtype) {
    case DType::kF32: return oracle::Format::kF32;
    case DType::kF16: return oracle::Format::kF16;
    case DType::kBF16: return oracle::Format::kBF16;
  }
  throw std::invalid_argument("to_oracle: unknown DType " + std::to_string(static_cast<int>(dtype)));
}

oracle::Visibility to_oracle(Mask mask, int64_t window_left, int64_t window_right) {
  switch (mask) {
    case Mask::kNone: return oracle::kAllKeys;
    case Mask::kCausalTopLeft: return oracle::kCausalTopLeft;
    case Mask::kCausalBottomRight: return oracle::kCausalBottomRight;
    case Mask::kWindowTopLeft: return {window_left, window_right, oracle::Alignment::kTopLeft};
    case Mask::kWindowBottomRight: return {window_left, window_right, oracle::Alignment::kBottomRight};
  }
  throw std::invalid_argument("to_oracle: unknown Mask " + std::to_string(static_cast<int>(mask)));
}

oracle::Arithmetic to_oracle(ComputePath path) {
  switch (path) {
    case ComputePath::kGeneralFp32: return oracle::Arithmetic::kGeneralFp32;
    case ComputePath::kTensorCore: return oracle::Arithmetic::kTensorCore;
    case ComputePath::kSplitTf32: return oracle::Arithmetic::kSplitTf32;
  }
  throw std::invalid_argument("to_oracle: unknown ComputePath " + std::to_string(static_cast<int>(path)));
}

oracle::Problem oracle_problem(const Params& params, std::span<const double> q, std::span<const double> k,
                               std::span<const double> v, std::span<const double> sink,
                               std::span<const int64_t> seqlens_q, std::span<const int64_t> seqlens_k) {
  oracle::Problem p;
  p.batch = params.batch;
  p.heads_q = params.heads_q;
  p.heads_kv = params.heads_kv;
  p.seqlen_q = params.seqlen_q;
  p.seqlen_k = params.seqlen_k;
  p.head_dim = params.head_dim;
  p.visibility = to_oracle(params.mask, params.window_left, params.window_right);
  p.scale = static_cast<double>(params.softmax_scale);
  p.softcap = static_cast<double>(params.softcap);
  p.sink = sink;
  p.seqlens_q = seqlens_q;
  p.seqlens_k = seqlens_k;
  p.q = q;
  p.k = k;
  p.v = v;
  return p;
}

oracle::RowBound oracle_bound(const oracle::Problem& problem, oracle::RowRef row, const oracle::RowResult& exact,
                              const Params& params, const KernelConfig& config, int32_t splits) {
  if (splits > 1) {  // the running sums model the unsplit order: a split bound does not use them
    return oracle::bound_row(exact, to_oracle(params.dtype), to_oracle(config.path), config.block_n, params.head_dim,
                             nullptr, splits);
  }
  const oracle::OrderedSums sums = oracle::ordered_sums(problem, row, exact, config.block_n);
  return oracle::bound_row(exact, to_oracle(params.dtype), to_oracle(config.path), config.block_n, params.head_dim,
                           &sums);
}

std::vector<double> oracle_reference(const oracle::Problem& problem, oracle::RowRef row, const Params& params,
                                     const KernelConfig& config, const oracle::RowResult* exact) {
  return oracle::emulated_row(problem, row, to_oracle(params.dtype), to_oracle(config.path), config.block_n, exact);
}

}  // namespace flashcheck
