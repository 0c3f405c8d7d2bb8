// Translation from the kernel's types to the oracle's (oracle_bridge.h): masks through their rows of masks.def
// (window sides and alignment), dtypes by name, compute paths by a switch that names every enumerator (-Wswitch);
// values out of range are a caller's bug and throw.
#include "flashcheck/oracle_bridge.h"

#include <stdexcept>
#include <string>

#include "flashcheck/dtype.h"
#include "flashcheck/mask_names.h"

namespace flashcheck {

oracle::Format to_oracle(DType dtype) {
  const DTypeInfo* info = find_dtype(dtype);
  const std::optional<oracle::Format> format = info != nullptr ? oracle::format_from_name(info->name) : std::nullopt;
  if (!format) {
    throw std::invalid_argument("to_oracle: no oracle format for DType " + std::to_string(static_cast<int>(dtype)));
  }
  return *format;
}

oracle::Visibility to_oracle(Mask mask, int64_t window_left, int64_t window_right) {
  const MaskName* entry = find_mask(mask);
  if (entry == nullptr) {
    throw std::invalid_argument("to_oracle: unknown Mask " + std::to_string(static_cast<int>(mask)));
  }
  const WindowSides sides = window_sides(*entry, window_left, window_right);
  const oracle::Alignment alignment =
      entry->alignment == Alignment::kBottomRight ? oracle::Alignment::kBottomRight : oracle::Alignment::kTopLeft;
  return {sides.left, sides.right, alignment};
}

oracle::Arithmetic to_oracle(ComputePath path) {
  switch (path) {
    case ComputePath::kGeneralFp32: return oracle::Arithmetic::kGeneralFp32;
    case ComputePath::kTensorCore: return oracle::Arithmetic::kTensorCore;
    case ComputePath::kSplitTf32: return oracle::Arithmetic::kSplitTf32;
    case ComputePath::kTensorCoreFp8: return oracle::Arithmetic::kTensorCoreFp8;
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
  p.head_dim_v = value_head_dim(params);
  p.visibility = to_oracle(params.mask, params.window_left, params.window_right);
  p.scale = static_cast<double>(params.softmax_scale);
  p.softcap = static_cast<double>(params.softcap);
  p.dropout = {params.dropout_p, params.dropout_seed, params.dropout_offset};
  p.sink = sink;
  p.seqlens_q = seqlens_q;
  p.seqlens_k = seqlens_k;
  p.q = q;
  p.k = k;
  p.v = v;
  return p;
}

namespace {

KeyRange to_key_range(oracle::KeySpan keys) { return {keys.begin, keys.end}; }

}  // namespace

KeyRange judged_visible_keys(const Params& params, int64_t row) {
  return to_key_range(oracle::visible_keys(oracle_problem(params, {}, {}, {}), row));
}

KeyRange judged_visible_keys(const oracle::Problem& problem, int64_t batch_index, int64_t row) {
  return to_key_range(oracle::visible_keys(problem, batch_index, row));
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
