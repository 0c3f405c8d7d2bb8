// Runner guards actually guard: a complete run is clean, and backends that misbehave on purpose (skip rows,
// write past the end, into padding, before LSE or beside an instrumentation buffer, modify their inputs) are
// caught by the poison scan, the canaries and the input hash. The instrumentation a run asks for (row m/l,
// tile counters, per-tile traces) is what the host model records through its own pointers. Also: failed
// calls, no-op shapes, copied inputs, and the GPU backend's answers on a machine without a device.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "flashcheck/host_model.h"
#include "flashcheck/runner.h"

#include "case_inputs.h"

namespace flashcheck {
namespace {

using test::inputs_for;

const char* const kPaddedLine =
    "f16 b=2 hq=4 hkv=2 sq=33 sk=47 d=64 mask=causal-br layout=bshd pad=4 q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=3";

TEST(Runner, ModelRunIsCompleteAndClean) {
  const HostInputs in = inputs_for(kPaddedLine);
  RunOptions options;
  options.instrument = true;
  const RunOutputs out = run_case(in, Backend::kHostModel, options);
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  EXPECT_EQ(out.unwritten_o, 0);
  EXPECT_EQ(out.unwritten_lse, 0);
  EXPECT_TRUE(out.canaries_intact) << out.damaged_buffer << " " << out.first_damaged_canary;
  EXPECT_TRUE(out.inputs_unchanged);
  ASSERT_EQ(out.o.size(), size_t{2 * 4 * 33 * 64});
  ASSERT_EQ(out.lse.size(), size_t{2 * 4 * 33});
  ASSERT_EQ(out.row_m.size(), out.lse.size());
  double norm = 0;
  for (double x : out.o) norm += x * x;
  EXPECT_GT(norm, 0.0);  // guards against a vacuous all-zero output
  for (size_t r = 0; r < out.lse.size(); ++r) {
    EXPECT_TRUE(std::isfinite(out.lse[r]));  // bottom-right causal with sk > sq: every row sees a key
    EXPECT_GE(out.row_l[r], 1.0f);           // the max term alone contributes exp(0) = 1
  }
  EXPECT_GT(out.config.block_m, 0);
}

// Counters and traces through the runner equal the host model's own, recorded through host pointers.
TEST(Runner, ModelRunRecordsTileCountersAndTraces) {
  const HostInputs in = inputs_for(kPaddedLine);
  const Params& p = in.params;
  RunOptions options;
  options.instrument = true;
  options.count_tiles = true;
  options.trace_rows = {0, 40, 2 * 4 * 33 - 1};
  options.trace_tiles = 4;
  const RunOutputs out = run_case(in, Backend::kHostModel, options);
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  EXPECT_TRUE(out.canaries_intact) << out.damaged_buffer << " " << out.first_damaged_canary;

  const size_t slots = options.trace_rows.size() * static_cast<size_t>(options.trace_tiles);
  std::vector<float> trace_m(slots, std::bit_cast<float>(kPoisonBits32)), trace_l = trace_m;
  std::vector<uint64_t> kinds(kTileKindCount, 0), buckets(kRescaleBuckets, 0);
  std::vector<uint8_t> o(in.q.size());
  std::vector<float> lse(out.lse.size());
  Params direct = p;
  direct.o = o.data();
  direct.lse = lse.data();
  HostModelOptions model;
  model.instrumentation.trace_rows = options.trace_rows.data();
  model.instrumentation.trace_row_count = static_cast<int32_t>(options.trace_rows.size());
  model.instrumentation.max_tiles = options.trace_tiles;
  model.instrumentation.trace_m = trace_m.data();
  model.instrumentation.trace_l = trace_l.data();
  model.instrumentation.tile_kind_counts = kinds.data();
  model.instrumentation.rescale_buckets = buckets.data();
  ASSERT_TRUE(run_host_model(direct, model).ok());

  EXPECT_EQ(out.tile_kind_counts, kinds);
  EXPECT_EQ(out.rescale_buckets, buckets);
  uint64_t total = 0;
  for (uint64_t n : out.tile_kind_counts) total += n;
  EXPECT_GT(total, 0u);
  ASSERT_EQ(out.trace_m.size(), slots);
  ASSERT_EQ(out.trace_l.size(), slots);
  int written = 0;
  for (size_t i = 0; i < slots; ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(out.trace_m[i]), std::bit_cast<uint32_t>(trace_m[i])) << "slot " << i;
    EXPECT_EQ(std::bit_cast<uint32_t>(out.trace_l[i]), std::bit_cast<uint32_t>(trace_l[i])) << "slot " << i;
    written += is_unwritten(out.trace_m[i]) ? 0 : 1;
  }
  EXPECT_GT(written, 0);
  EXPECT_LT(written, static_cast<int>(slots));  // sk = 47 is one K/V tile: slots past it stay unwritten
}

TEST(Runner, TraceRowsMustLieInsideTheProblem) {
  const HostInputs in = inputs_for("f32 b=1 hq=2 hkv=2 sq=5 sk=5 d=8 mask=none seed=1");
  RunOptions options;
  options.trace_tiles = 1;
  for (int64_t row : {int64_t{-1}, int64_t{10}}) {
    options.trace_rows = {0, row};
    const RunOutputs out = run_case(in, Backend::kHostModel, options);
    EXPECT_EQ(out.status.code(), StatusCode::kInvalidArgument) << row;
  }
  options.trace_rows = {9};
  options.trace_tiles = 0;
  EXPECT_EQ(run_case(in, Backend::kHostModel, options).status.code(), StatusCode::kInvalidArgument);
}

TEST(Runner, CountPoisonSeesOnlyThePoisonPattern) {
  const uint16_t half[] = {kPoisonBits16, 0x7E00, kPoisonBits16, 0x0000, 0x7FC0};
  EXPECT_EQ(count_poison(DType::kF16, reinterpret_cast<const uint8_t*>(half), 5), 2);
  EXPECT_EQ(count_poison(DType::kBF16, reinterpret_cast<const uint8_t*>(half), 1), 1);
  const uint32_t single[] = {kPoisonBits32, 0x7FC00000u, kPoisonBits32 ^ 1u};
  EXPECT_EQ(count_poison(DType::kF32, reinterpret_cast<const uint8_t*>(single), 3), 1);
}

// A backend that forgets the last query row of every (batch, head).
TEST(Runner, SkippedRowsAreUnwritten) {
  for (const char* line : {kPaddedLine, "f32 b=1 hq=3 hkv=3 sq=17 sk=17 d=24 mask=none seed=1"}) {
    const HostInputs in = inputs_for(line);
    const HostBackend skip_last_row = [](const Params& params, const Instrumentation&) {
      Params shorter = params;
      shorter.seqlen_q -= 1;
      return run_host_model(shorter);
    };
    const RunOutputs out = run_case(in, skip_last_row);
    ASSERT_TRUE(out.status.ok()) << out.status.message();
    const int64_t heads = in.params.batch * in.params.heads_q;
    EXPECT_EQ(out.unwritten_o, heads * in.params.head_dim) << line;
    EXPECT_EQ(out.unwritten_lse, heads) << line;  // LSE is contiguous: the shorter run leaves its tail
    EXPECT_TRUE(out.canaries_intact);
  }
}

struct Misbehaviour {
  const char* name;
  const char* damaged_buffer;
  std::function<void(const Params&)> act;  // runs after a correct model run
};

TEST(Runner, StrayWritesDamageCanaries) {
  const HostInputs in = inputs_for(kPaddedLine);
  const int64_t o_bytes = static_cast<int64_t>(in.q.size());
  const Misbehaviour kCases[] = {
      {"one element past the end of O", "O",
       [&](const Params& p) { std::memset(static_cast<uint8_t*>(p.o) + o_bytes, 0, 2); }},
      {"one element before O", "O", [&](const Params& p) { std::memset(static_cast<uint8_t*>(p.o) - 2, 0, 2); }},
      {"into the padding after the first O row", "O padding",
       [&](const Params& p) { std::memset(static_cast<uint8_t*>(p.o) + 64 * 2, 0, 2); }},
      {"one float before LSE", "LSE", [&](const Params& p) { p.lse[-1] = 0.0f; }},
      {"one float past LSE", "LSE", [&](const Params& p) { p.lse[2 * 4 * 33] = 0.0f; }},
  };
  for (const Misbehaviour& m : kCases) {
    const HostBackend backend = [&](const Params& params, const Instrumentation&) {
      const Status status = run_host_model(params);
      m.act(params);
      return status;
    };
    const RunOutputs out = run_case(in, backend);
    EXPECT_TRUE(out.status.ok());
    EXPECT_FALSE(out.canaries_intact) << m.name;
    EXPECT_STREQ(out.damaged_buffer, m.damaged_buffer) << m.name;
    EXPECT_EQ(out.unwritten_o, 0) << m.name;
  }
}

// The instrumentation buffers have canaries of their own.
TEST(Runner, StrayInstrumentationWritesDamageCanaries) {
  const HostInputs in = inputs_for(kPaddedLine);
  RunOptions options;
  options.instrument = true;
  options.count_tiles = true;
  options.trace_rows = {3};
  options.trace_tiles = 2;
  struct Stray {
    const char* damaged_buffer;
    std::function<void(const Instrumentation&)> act;
  };
  const Stray kCases[] = {
      {"m", [](const Instrumentation& inst) { inst.row_m[-1] = 0.0f; }},
      {"l", [](const Instrumentation& inst) { inst.row_l[2 * 4 * 33] = 0.0f; }},
      {"tile kinds", [](const Instrumentation& inst) { inst.tile_kind_counts[kTileKindCount] = 1; }},
      {"rescale buckets", [](const Instrumentation& inst) { inst.rescale_buckets[-1] = 1; }},
      {"trace m", [](const Instrumentation& inst) { inst.trace_m[2] = 0.0f; }},
      {"trace l", [](const Instrumentation& inst) { inst.trace_l[-1] = 0.0f; }},
  };
  for (const Stray& stray : kCases) {
    const HostBackend backend = [&](const Params& params, const Instrumentation& inst) {
      HostModelOptions model;
      model.instrumentation = inst;
      const Status status = run_host_model(params, model);
      stray.act(inst);
      return status;
    };
    const RunOutputs out = run_case(in, backend, options);
    EXPECT_TRUE(out.status.ok());
    EXPECT_FALSE(out.canaries_intact) << stray.damaged_buffer;
    EXPECT_STREQ(out.damaged_buffer, stray.damaged_buffer);
  }
}

TEST(Runner, ModifiedInputsAreDetected) {
  const HostInputs in = inputs_for(kPaddedLine);
  const HostBackend scribbler = [](const Params& params, const Instrumentation&) {
    const Status status = run_host_model(params);
    const_cast<uint8_t*>(static_cast<const uint8_t*>(params.v))[7] ^= 0x10;  // a backend writing through const
    return status;
  };
  const RunOutputs out = run_case(in, scribbler);
  EXPECT_FALSE(out.inputs_unchanged);
}

// The sink travels as a guarded copy: the backend reads the runner's copy (the same values); a write into it is
// a modified input, a write beside it damages its canary. Without a sink the backend sees a null pointer.
TEST(Runner, SinkIsAGuardedInput) {
  const HostInputs in =
      inputs_for("f32 b=1 hq=4 hkv=2 sq=9 sk=12 d=16 mask=window-br window=4,0 sink=normal(0,2) seed=4");
  ASSERT_EQ(in.sink.size(), size_t{4});
  struct Act {
    const char* what;
    std::function<void(float*)> act;
    bool inputs_unchanged;
    const char* damaged_buffer;  // "" when the canaries must stay intact
  };
  const Act kActs[] = {
      {"nothing", [](float*) {}, true, ""},
      {"a write into the sink", [](float* sink) { sink[2] = 1.0f; }, false, ""},
      {"a write one float past the sink", [](float* sink) { sink[4] = 1.0f; }, true, "sink"},
      {"a write one float before the sink", [](float* sink) { sink[-1] = 1.0f; }, true, "sink"},
  };
  for (const Act& a : kActs) {
    std::vector<float> seen;
    const HostBackend backend = [&](const Params& params, const Instrumentation&) {
      if (params.sink == nullptr || params.sink == in.sink.data()) return Status{StatusCode::kInvalidArgument, "no copy"};
      seen.assign(params.sink, params.sink + params.heads_q);
      const Status status = run_host_model(params);
      a.act(const_cast<float*>(params.sink));  // a backend writing through const
      return status;
    };
    const RunOutputs out = run_case(in, backend);
    ASSERT_TRUE(out.status.ok()) << a.what << ": " << out.status.message();
    EXPECT_EQ(seen, in.sink) << a.what;
    EXPECT_EQ(out.inputs_unchanged, a.inputs_unchanged) << a.what;
    EXPECT_EQ(out.canaries_intact, *a.damaged_buffer == '\0') << a.what;
    EXPECT_STREQ(out.damaged_buffer, a.damaged_buffer) << a.what;
  }
  const HostInputs no_sink = inputs_for("f32 b=1 hq=4 hkv=2 sq=9 sk=12 d=16 mask=window-br window=4,0 seed=4");
  bool null_sink = false;
  const HostBackend backend = [&](const Params& params, const Instrumentation&) {
    null_sink = params.sink == nullptr;
    return run_host_model(params);
  };
  EXPECT_TRUE(run_case(no_sink, backend).status.ok());
  EXPECT_TRUE(null_sink);
}

TEST(Runner, FailedCallsAndNoOps) {
  // head_dim 0 is invalid: the model rejects it, nothing is written, no outputs are decoded.
  RunOutputs out = run_case(inputs_for("f16 b=1 hq=2 hkv=2 sq=8 sk=8 d=0 mask=none seed=1"), Backend::kHostModel);
  EXPECT_EQ(out.status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(out.o.empty());
  EXPECT_TRUE(out.canaries_intact);
  // hq not a multiple of hkv: rejected too.
  out = run_case(inputs_for("bf16 b=1 hq=3 hkv=2 sq=8 sk=8 d=16 mask=none seed=1"), Backend::kHostModel);
  EXPECT_EQ(out.status.code(), StatusCode::kInvalidArgument);
  // Zero sizes are successful no-ops.
  for (const char* line : {"f16 b=0 hq=2 hkv=2 sq=8 sk=8 d=16 mask=none seed=1",
                           "f16 b=1 hq=2 hkv=2 sq=0 sk=8 d=16 mask=none seed=1"}) {
    out = run_case(inputs_for(line), Backend::kHostModel);
    EXPECT_TRUE(out.status.ok()) << line << ": " << out.status.message();
    EXPECT_TRUE(out.o.empty() && out.lse.empty());
    EXPECT_TRUE(out.canaries_intact);
  }
  // seqlen_k = 0: every row has no visible key: O = 0, LSE = -inf.
  out = run_case(inputs_for("f32 b=1 hq=2 hkv=2 sq=5 sk=0 d=16 mask=none seed=1"), Backend::kHostModel);
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  EXPECT_EQ(out.unwritten_o, 0);
  for (double x : out.o) EXPECT_EQ(x, 0.0);
  for (float x : out.lse) EXPECT_EQ(x, -std::numeric_limits<float>::infinity());
}

TEST(Runner, CopiedInputsAreRebound) {
  HostInputs copy;
  {
    const HostInputs original = inputs_for("bf16 b=1 hq=2 hkv=1 sq=9 sk=9 d=32 mask=causal-tl seed=5");
    copy = original;  // copy.params still points into `original`, which dies here
  }
  const RunOutputs out = run_case(copy, Backend::kHostModel);
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  EXPECT_EQ(out.unwritten_o, 0);
  EXPECT_TRUE(out.inputs_unchanged);
}

TEST(Runner, GpuBackendWithoutDeviceSaysSo) {
  if (device_available()) GTEST_SKIP() << "a CUDA device is present: the GPU tier tests the GPU backend";
  const HostInputs in = inputs_for("f16 b=1 hq=1 hkv=1 sq=4 sk=4 d=16 mask=none seed=1");
  RunOutputs out = run_case(in, Backend::kGpu);
  EXPECT_EQ(out.status.code(), StatusCode::kNoDevice) << out.status.message();
  EXPECT_TRUE(out.o.empty());
  RunOptions options;
  options.instrument = true;
  out = run_case(in, Backend::kGpu, options);
  // Without CUDA there is no GPU at all; with CUDA but the production harness, instrumentation is unsupported.
  EXPECT_TRUE(out.status.code() == StatusCode::kNoDevice || out.status.code() == StatusCode::kUnsupported)
      << out.status.message();
  options.instrument = false;
  options.count_tiles = true;
  DevicePool pool;
  options.device_pool = &pool;
  out = run_case(in, Backend::kGpu, options);
  EXPECT_TRUE(out.status.code() == StatusCode::kNoDevice || out.status.code() == StatusCode::kUnsupported)
      << out.status.message();
  EXPECT_EQ(gpu_instrumentation_linked(), false);
}

}  // namespace
}  // namespace flashcheck
