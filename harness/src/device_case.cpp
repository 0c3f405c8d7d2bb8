// Cases on device inputs (device_inputs.h), the host side: which cases take the path, the memory they need on the
// device, and the sampled-row verdict. The checked rows are oracle::sample_rows' for the case's shape (no values
// needed); each distinct (b, h) among them becomes one query head of a small problem over its own K/V head, whose
// values are regenerated on the host (inputs.h, regenerate_rows: the Q rows checked, the whole K and V of the
// slice), in parallel over slices; judge_slices() then checks them with the verdict's own code and report.
#include <algorithm>
#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "flashcheck/device_inputs.h"
#include "flashcheck/oracle_bridge.h"

namespace flashcheck {

Status check_device_inputs_case(const Case& c) {
  if (Status s = validate_case(c); !s.ok()) return s;
  const char* const kDenseOnly = ": device inputs are generated for dense cases only (no seqs, page or poison)";
  if (!c.seqs.empty()) return {StatusCode::kInvalidArgument, std::string("seqs") + kDenseOnly};
  if (c.page > 0) return {StatusCode::kInvalidArgument, std::string("page") + kDenseOnly};
  if (c.poison != Poison::kNaN) return {StatusCode::kInvalidArgument, std::string("poison") + kDenseOnly};
  if (c.value_dim() != c.head_dim) {
    return {StatusCode::kInvalidArgument, "dv: device inputs are generated for head_dim_v = head_dim only"};
  }
  if (!c.subject.empty()) {
    return {StatusCode::kInvalidArgument, "subject: device inputs run flashcheck's own kernel, not a subject"};
  }
  return Status::ok_status();
}

bool needs_device_inputs(const Case& c, int64_t host_limit) {
  if (!check_device_inputs_case(c).ok()) return false;
  const int64_t bytes = host_inputs_bytes(c);
  return bytes < 0 || bytes > host_limit;
}

Status host_model_refusal(const Case& c, int64_t host_limit) {
  const int64_t bytes = host_inputs_bytes(c);
  return {StatusCode::kUnsupported,
          "host inputs: the case needs " + (bytes < 0 ? std::string("more than 2^63") : std::to_string(bytes)) +
              " bytes of host memory, over the limit of " + std::to_string(host_limit) +
              "; it runs on the GPU backend, whose inputs are generated on the device (device_inputs.h)"};
}

int64_t device_case_bytes(const Case& c) {
  // Q and O (with its guards) laid out alike, K and V, LSE with its guards; saturating (validate_case bounds each
  // tensor's elements, not their sum).
  const double row_elems = double(c.head_dim) + double(c.pad);
  const double esize = double(dtype_size(c.dtype));
  const double q = double(c.batch) * double(c.heads_q) * double(c.seqlen_q);
  const double kv = double(c.batch) * double(c.heads_kv) * double(c.seqlen_k);
  const double bytes = (2 * q + 2 * kv) * row_elems * esize + q * sizeof(float) + 4 * double(kGuardBytes);
  return bytes < 0x1p62 ? static_cast<int64_t>(bytes) : int64_t{1} << 62;
}

std::vector<oracle::RowRef> device_check_rows(const Case& c, const JudgeOptions& options) {
  const Params params = case_params(c);
  const KernelConfig config = select_config(params);
  // The rows judge() would check: sample_rows needs the shape and the visibility alone.
  const oracle::Problem shape = oracle_problem(params, {}, {}, {});
  return oracle::sample_rows(shape, config.block_m, config.block_n, c.seed, options.full_check_limit,
                             options.random_rows);
}

Verdict judge_sampled(const Case& c, std::span<const oracle::RowRef> rows, const SampledRun& run,
                      const JudgeOptions& options) {
  const Params params = case_params(c);
  const oracle::Problem shape = oracle_problem(params, {}, {}, {});
  RunOutputs outputs;
  outputs.status = run.status;
  outputs.config = run.config;
  outputs.splits = run.splits;
  outputs.unwritten_o = run.unwritten_o;
  outputs.unwritten_lse = run.unwritten_lse;
  outputs.canaries_intact = run.canaries_intact;
  outputs.damaged_buffer = run.damaged_buffer;
  outputs.first_damaged_canary = run.first_damaged_canary;
  outputs.inputs_unchanged = run.inputs_unchanged;
  outputs.modified_input = run.modified_input;
  const int64_t rows_total = c.batch * c.heads_q * c.seqlen_q;
  if (!run.status.ok()) {  // a failed call: the verdict says so, no rows to check
    return judge_slices(c, params, shape, {}, {}, rows_total, outputs, options);
  }

  // One slice per distinct (b, h) of the checked rows, in their (sorted) order.
  std::map<std::pair<int64_t, int64_t>, int64_t> slice_of;
  std::vector<std::pair<int64_t, int64_t>> slices;
  for (const oracle::RowRef& row : rows) {
    if (slice_of.emplace(std::make_pair(row.b, row.h), static_cast<int64_t>(slices.size())).second) {
      slices.emplace_back(row.b, row.h);
    }
  }
  const int64_t count = static_cast<int64_t>(slices.size());
  const int64_t sq = c.seqlen_q, sk = c.seqlen_k, d = c.head_dim;
  const int64_t group = c.heads_q / c.heads_kv;
  std::vector<double> q(static_cast<size_t>(count * sq * d), 0.0), k(static_cast<size_t>(count * sk * d)),
      v(static_cast<size_t>(count * sk * d));
  std::vector<std::vector<int64_t>> slice_rows(static_cast<size_t>(count));
  std::vector<oracle::RowRef> at(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    const int64_t j = slice_of[{rows[r].b, rows[r].h}];
    slice_rows[static_cast<size_t>(j)].push_back(rows[r].i);
    at[r] = oracle::RowRef{0, j, rows[r].i};
  }
  // Regenerate the slices in parallel: each worker takes the next slice and writes only its own ranges.
  std::atomic<int64_t> next{0};
  const auto work = [&] {
    for (int64_t j = next++; j < count; j = next++) {
      const auto [b, h] = slices[static_cast<size_t>(j)];
      regenerate_rows(c, 'k', b, h / group, 0, sk, k.data() + j * sk * d);
      regenerate_rows(c, 'v', b, h / group, 0, sk, v.data() + j * sk * d);
      for (const int64_t i : slice_rows[static_cast<size_t>(j)]) {
        regenerate_rows(c, 'q', b, h, i, i + 1, q.data() + (j * sq + i) * d);
      }
    }
  };
  const int64_t workers = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, count);
  std::vector<std::thread> threads;
  for (int64_t t = 1; t < workers; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();

  std::vector<float> sink;
  std::vector<double> sink_exact, slice_sink;
  make_sink(c, &sink, &sink_exact);
  if (!sink_exact.empty()) {
    for (const auto& [b, h] : slices) slice_sink.push_back(sink_exact[static_cast<size_t>(h)]);
  }
  // The slices' problem: batch 1, one query head per slice over a K/V head of its own, the case's lengths, mask,
  // scale and softcap (the bridge's translation of the same Params).
  Params slice_params = params;
  slice_params.batch = 1;
  slice_params.heads_q = count;
  slice_params.heads_kv = count;
  const oracle::Problem problem = oracle_problem(slice_params, q, k, v, slice_sink);
  outputs.o.assign(static_cast<size_t>(count * sq * d), 0.0);
  outputs.lse.assign(static_cast<size_t>(count * sq), 0.0f);
  for (size_t r = 0; r < rows.size(); ++r) {
    const int64_t flat = at[r].h * sq + at[r].i;
    std::copy_n(run.o.begin() + static_cast<std::ptrdiff_t>(r * static_cast<size_t>(d)), d,
                outputs.o.begin() + static_cast<std::ptrdiff_t>(flat * d));
    outputs.lse[static_cast<size_t>(flat)] = run.lse[r];
  }
  return judge_slices(c, params, problem, at, rows, rows_total, outputs, options);
}

DeviceCheck check_on_device(const Case& c, const JudgeOptions& options) {
  DeviceCheck check;
  if (check.status = check_device_inputs_case(c); !check.status.ok()) return check;
  const std::vector<oracle::RowRef> rows = device_check_rows(c, options);
  const SampledRun run = run_sampled_on_device(c, rows);
  if (run.status.code() == StatusCode::kNoDevice) {
    check.status = run.status;
    check.device_memory_short = run.device_memory_short;
    check.device_bytes_needed = run.device_bytes_needed;
    check.device_bytes_free = run.device_bytes_free;
    return check;
  }
  check.verdict = judge_sampled(c, rows, run, options);
  return check;
}

}  // namespace flashcheck
