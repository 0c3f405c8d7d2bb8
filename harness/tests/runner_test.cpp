// Runner guards actually guard: a complete run is clean, and backends that misbehave on purpose (skip rows,
// write past the end, into padding, before LSE or beside an instrumentation buffer, modify their inputs) are
// caught by the poison scan, the canaries and the input hash. The instrumentation a run asks for (row m/l,
// tile counters, per-tile traces) is what the host model records through its own pointers. Also: failed
// calls, no-op shapes, copied inputs, and the GPU backend's answers on a machine without a device. With sequences:
// varlen, paged and split runs on the host model against each sequence alone, the packed run and the unsplit run;
// trace rows translated to the kernel's rows; the index arrays guarded like the other inputs.
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
  EXPECT_STREQ(out.modified_input, "v");
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

// ---- Sequences: packed Q and O, packed or paged K/V, split-KV.

// Varlen: a zero-row sequence, one whose keys end before its capacity (seqused_k), bshd with padding.
const char* const kVarlenLine =
    "f16 b=3 hq=4 hkv=2 sq=37 sk=50 d=32 mask=causal-br layout=bshd pad=3 seqs=37:50,0:7,5:1+3 q=normal(0,1) "
    "k=normal(0,1) v=normal(0,1) seed=3";
const char* const kPagedLine =
    "f16 b=3 hq=4 hkv=2 sq=37 sk=50 d=32 mask=causal-br layout=bshd pad=3 seqs=37:50,0:7,5:1+3 page=3 poison=inf "
    "q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=3";

// A varlen run is complete and clean, its outputs canonical with zeros past each sequence, and each sequence's rows
// are bit for bit those of the same model run on that sequence alone as a dense problem (Q, K, V read in place from
// the packed buffers, the varlen run's tiles).
TEST(Runner, VarlenModelRunMatchesEachSequenceAlone) {
  const HostInputs in = inputs_for(kVarlenLine);
  RunOptions options;
  options.instrument = true;
  const RunOutputs out = run_case(in, Backend::kHostModel, options);
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  EXPECT_EQ(out.unwritten_o, 0);
  EXPECT_EQ(out.unwritten_lse, 0);
  EXPECT_TRUE(out.canaries_intact) << out.damaged_buffer << " " << out.first_damaged_canary;
  EXPECT_TRUE(out.inputs_unchanged) << out.modified_input;
  constexpr int64_t kHeads = 4, kSq = 37, kD = 32, kRow = 35;
  ASSERT_EQ(out.o.size(), size_t{3 * kHeads * kSq * kD});
  ASSERT_EQ(out.lse.size(), size_t{3 * kHeads * kSq});
  ASSERT_EQ(out.row_m.size(), out.lse.size());
  const int64_t q_len[3] = {37, 0, 5}, k_len[3] = {50, 0, 1};
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t h = 0; h < kHeads; ++h) {
      for (int64_t i = q_len[b]; i < kSq; ++i) {  // past the sequence: 0
        const size_t row = static_cast<size_t>((b * kHeads + h) * kSq + i);
        EXPECT_EQ(out.lse[row], 0.0f);
        EXPECT_EQ(out.row_m[row], 0.0f);
        for (int64_t d = 0; d < kD; ++d) ASSERT_EQ(out.o[row * kD + static_cast<size_t>(d)], 0.0);
      }
    }
    if (q_len[b] == 0) continue;
    // Sequence b alone: batch 1, its lengths, pointers into the packed buffers.
    Params alone = make_params(DType::kF16, 1, kHeads, 2, q_len[b], k_len[b], kD, Mask::kCausalBottomRight, Layout::kBSHD);
    alone.q_stride = {q_len[b] * kHeads * kRow, kRow, kHeads * kRow};
    alone.k_stride = {k_len[b] * 2 * kRow, kRow, 2 * kRow};
    alone.v_stride = alone.k_stride;
    alone.o_stride = {0, kD, kHeads * kD};
    alone.q = in.q.data() + in.cu_seqlens_q[static_cast<size_t>(b)] * kHeads * kRow * 2;
    alone.k = in.k.data() + in.cu_seqlens_k[static_cast<size_t>(b)] * 2 * kRow * 2;
    alone.v = in.v.data() + in.cu_seqlens_k[static_cast<size_t>(b)] * 2 * kRow * 2;
    std::vector<uint16_t> o(static_cast<size_t>(q_len[b] * kHeads * kD));
    std::vector<float> lse(static_cast<size_t>(kHeads * q_len[b]));
    alone.o = o.data();
    alone.lse = lse.data();
    HostModelOptions model;
    model.override_config = true;
    model.config = out.config;
    ASSERT_TRUE(run_host_model(alone, model).ok()) << "sequence " << b;
    for (int64_t h = 0; h < kHeads; ++h) {
      for (int64_t i = 0; i < q_len[b]; ++i) {
        const size_t row = static_cast<size_t>((b * kHeads + h) * kSq + i);
        EXPECT_EQ(std::bit_cast<uint32_t>(out.lse[row]), std::bit_cast<uint32_t>(lse[static_cast<size_t>(h * q_len[b] + i)]))
            << "b " << b << " h " << h << " i " << i;
        for (int64_t d = 0; d < kD; ++d) {
          const double want = decode_dtype(DType::kF16, o[static_cast<size_t>((i * kHeads + h) * kD + d)]);
          ASSERT_EQ(out.o[row * kD + static_cast<size_t>(d)], want) << "b " << b << " h " << h << " i " << i << " d " << d;
        }
      }
    }
  }
  double norm = 0;
  for (double x : out.o) norm += x * x;
  EXPECT_GT(norm, 0.0);
}

// Pages of 3 keys in a shuffled order, poison=inf everywhere else: the same results as the packed layout, bit for
// bit (the same logical values, the same tiles), and a clean run.
TEST(Runner, PagedModelRunEqualsThePackedRun) {
  const HostInputs paged = inputs_for(kPagedLine), packed = inputs_for(kVarlenLine);
  ASSERT_FALSE(paged.page_table.empty());
  RunOptions options;
  options.instrument = true;
  const RunOutputs a = run_case(paged, Backend::kHostModel, options), b = run_case(packed, Backend::kHostModel, options);
  ASSERT_TRUE(a.status.ok()) << a.status.message();
  ASSERT_TRUE(b.status.ok()) << b.status.message();
  EXPECT_EQ(a.unwritten_o, 0);
  EXPECT_EQ(a.unwritten_lse, 0);
  EXPECT_TRUE(a.canaries_intact) << a.damaged_buffer << " " << a.first_damaged_canary;
  EXPECT_TRUE(a.inputs_unchanged) << a.modified_input;
  EXPECT_EQ(a.config.block_n, b.config.block_n);
  ASSERT_EQ(a.o.size(), b.o.size());
  for (size_t i = 0; i < a.o.size(); ++i) ASSERT_EQ(a.o[i], b.o[i]) << "element " << i;
  for (size_t i = 0; i < a.lse.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(a.lse[i]), std::bit_cast<uint32_t>(b.lse[i])) << "row " << i;
    EXPECT_EQ(std::bit_cast<uint32_t>(a.row_l[i]), std::bit_cast<uint32_t>(b.row_l[i])) << "row " << i;
  }
  for (double x : a.o) ASSERT_TRUE(std::isfinite(x));  // no poison reached O
}

// Split-KV (dense and with sequences): complete and clean, and within fp32 rounding of the unsplit run.
TEST(Runner, SplitModelRunsAreCompleteAndCloseToUnsplit) {
  const std::string rest = " q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=8";
  for (const std::string shape : {std::string("f32 b=2 hq=2 hkv=1 sq=20 sk=300 d=16 mask=causal-br"),
                                  std::string("bf16 b=2 hq=2 hkv=1 sq=20 sk=300 d=16 mask=none seqs=20:300,3:129+5")}) {
    const HostInputs split = inputs_for(shape + " splits=3" + rest), unsplit = inputs_for(shape + rest);
    EXPECT_EQ(split.params.num_splits, 3);
    const RunOutputs a = run_case(split, Backend::kHostModel), b = run_case(unsplit, Backend::kHostModel);
    ASSERT_TRUE(a.status.ok()) << shape << ": " << a.status.message();
    ASSERT_TRUE(b.status.ok()) << shape << ": " << b.status.message();
    EXPECT_EQ(a.splits, 3) << shape;  // what the verdict's bound counts
    EXPECT_EQ(b.splits, 1) << shape;
    EXPECT_EQ(a.unwritten_o, 0) << shape;
    EXPECT_EQ(a.unwritten_lse, 0) << shape;
    EXPECT_TRUE(a.canaries_intact) << shape << ": " << a.damaged_buffer;
    EXPECT_TRUE(a.inputs_unchanged) << shape;
    ASSERT_EQ(a.o.size(), b.o.size());
    const double tolerance = split.params.dtype == DType::kF32 ? 1e-5 : 1e-2;  // a few roundings of O
    for (size_t i = 0; i < a.o.size(); ++i) ASSERT_NEAR(a.o[i], b.o[i], tolerance) << shape << " element " << i;
    bool merged = false;  // the fp32 LSE sees the merge's other summation order somewhere: the runs were split
    for (size_t i = 0; i < a.lse.size(); ++i) {
      ASSERT_NEAR(a.lse[i], b.lse[i], 1e-4) << shape << " row " << i;
      merged = merged || a.lse[i] != b.lse[i];
    }
    EXPECT_TRUE(merged) << shape;
  }
}

// Trace rows and the per-row arrays: the caller names canonical rows, the backend sees the kernel's row index
// (h * total_q + cu_seqlens_q[b] + i), and RunOutputs maps them back. A row past its sequence is refused.
TEST(Runner, TraceRowsAreCanonicalRowsOfSequences) {
  const HostInputs in = inputs_for(kVarlenLine);
  constexpr int64_t kHeads = 4, kSq = 37;
  const int64_t total_q = in.params.total_q;
  ASSERT_EQ(total_q, 42);
  struct Row {
    int64_t b, h, i;
  };
  const Row kRows[] = {{0, 0, 0}, {2, 3, 4}, {0, 1, 36}, {2, 0, 0}};
  RunOptions options;
  options.instrument = true;
  options.trace_tiles = 4;
  std::vector<int64_t> kernel_rows;
  for (const Row& r : kRows) {
    options.trace_rows.push_back((r.b * kHeads + r.h) * kSq + r.i);
    kernel_rows.push_back(r.h * total_q + in.cu_seqlens_q[static_cast<size_t>(r.b)] + r.i);
  }
  std::vector<int64_t> seen_rows;
  const HostBackend backend = [&](const Params& params, const Instrumentation& inst) {
    seen_rows.assign(inst.trace_rows, inst.trace_rows + inst.trace_row_count);
    HostModelOptions model;
    model.instrumentation = inst;
    return run_host_model(params, model);
  };
  const RunOutputs out = run_case(in, backend, options);
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  EXPECT_TRUE(out.canaries_intact) << out.damaged_buffer;
  EXPECT_EQ(seen_rows, kernel_rows);

  // The model called directly with kernel rows: the same traces, and its per-row arrays in the kernel's order.
  Params direct = in.params;
  std::vector<uint8_t> o(in.q.size());
  const size_t rows = static_cast<size_t>(kHeads * total_q);
  std::vector<float> lse(rows), row_m(rows), row_l(rows);
  const size_t slots = kernel_rows.size() * 4;
  std::vector<float> trace_m(slots, std::bit_cast<float>(kPoisonBits32)), trace_l = trace_m;
  direct.o = o.data();
  direct.lse = lse.data();
  HostModelOptions model;
  model.instrumentation.row_m = row_m.data();
  model.instrumentation.row_l = row_l.data();
  model.instrumentation.trace_rows = kernel_rows.data();
  model.instrumentation.trace_row_count = static_cast<int32_t>(kernel_rows.size());
  model.instrumentation.max_tiles = 4;
  model.instrumentation.trace_m = trace_m.data();
  model.instrumentation.trace_l = trace_l.data();
  ASSERT_TRUE(run_host_model(direct, model).ok());
  for (size_t i = 0; i < slots; ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(out.trace_m[i]), std::bit_cast<uint32_t>(trace_m[i])) << "slot " << i;
    EXPECT_EQ(std::bit_cast<uint32_t>(out.trace_l[i]), std::bit_cast<uint32_t>(trace_l[i])) << "slot " << i;
  }
  for (size_t r = 0; r < kernel_rows.size(); ++r) {
    const size_t canonical = static_cast<size_t>(options.trace_rows[r]);
    const size_t kernel = static_cast<size_t>(kernel_rows[r]);
    EXPECT_EQ(std::bit_cast<uint32_t>(out.row_m[canonical]), std::bit_cast<uint32_t>(row_m[kernel])) << r;
    EXPECT_EQ(std::bit_cast<uint32_t>(out.lse[canonical]), std::bit_cast<uint32_t>(lse[kernel])) << r;
  }
  // Sequence 1 has no rows, sequence 2 five: canonical rows there are not rows of the problem.
  for (const Row& r : {Row{1, 0, 0}, Row{2, 1, 5}}) {
    options.trace_rows = {(r.b * kHeads + r.h) * kSq + r.i};
    const RunOutputs refused = run_case(in, Backend::kHostModel, options);
    EXPECT_EQ(refused.status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status.message().find("of sequence " + std::to_string(r.b)), std::string::npos)
        << refused.status.message();
  }
}

// The index arrays are inputs the backend gets as guarded copies: writing into one is a modified input named by
// the array, writing beside one damages its canary; the packed O and LSE are scanned like dense ones.
TEST(Runner, IndexArraysAreGuardedInputs) {
  const HostInputs packed = inputs_for(kVarlenLine), paged = inputs_for(kPagedLine);
  struct Act {
    const char* what;
    const HostInputs* inputs;
    std::function<void(const Params&)> act;
    const char* modified_input;  // "" when the inputs must stay unchanged
    const char* damaged_buffer;  // "" when the canaries must stay intact
  };
  const auto writable = [](const int32_t* p) { return const_cast<int32_t*>(p); };  // a backend writing through const
  const Act kActs[] = {
      {"nothing", &paged, [](const Params&) {}, "", ""},
      {"a write into the page table", &paged, [&](const Params& p) { writable(p.page_table)[5] ^= 1; }, "page_table", ""},
      {"a write into seqused_k", &paged, [&](const Params& p) { writable(p.seqused_k)[0] = 0; }, "seqused_k", ""},
      {"a write one past seqused_k", &paged, [&](const Params& p) { writable(p.seqused_k)[3] = 0; }, "", "seqused_k"},
      {"a write one past the page table", &paged,
       [&](const Params& p) { writable(p.page_table)[p.batch * p.max_pages_per_seq] = 0; }, "", "page_table"},
      {"a write before cu_seqlens_q", &packed, [&](const Params& p) { writable(p.cu_seqlens_q)[-1] = 0; }, "",
       "cu_seqlens_q"},
      {"a write into cu_seqlens_k", &packed, [&](const Params& p) { writable(p.cu_seqlens_k)[1] += 1; }, "cu_seqlens_k",
       ""},
      {"a write into K", &packed, [&](const Params& p) { const_cast<uint8_t*>(static_cast<const uint8_t*>(p.k))[3] ^= 1; },
       "k", ""},
  };
  for (const Act& a : kActs) {
    bool copies = false;
    const HostBackend backend = [&](const Params& params, const Instrumentation&) {
      const HostInputs& in = *a.inputs;
      copies = params.cu_seqlens_q != in.cu_seqlens_q.data() &&
               (in.page_table.empty() || params.page_table != in.page_table.data());
      const Status status = run_host_model(params);
      a.act(params);
      return status;
    };
    const RunOutputs out = run_case(*a.inputs, backend);
    ASSERT_TRUE(out.status.ok()) << a.what << ": " << out.status.message();
    EXPECT_TRUE(copies) << a.what;
    EXPECT_EQ(out.inputs_unchanged, *a.modified_input == '\0') << a.what;
    EXPECT_STREQ(out.modified_input, a.modified_input) << a.what;
    EXPECT_EQ(out.canaries_intact, *a.damaged_buffer == '\0') << a.what;
    EXPECT_STREQ(out.damaged_buffer, a.damaged_buffer) << a.what;
  }
  // O and LSE in the kernel's packed layouts: a row left (or made) unwritten, a write into a packed row's padding.
  const int64_t o_row = packed.params.o_stride.row;  // bshd: heads_q * (d + pad)
  const HostBackend unwrite = [&](const Params& params, const Instrumentation&) {
    const Status status = run_host_model(params);
    // Sequence 2, head 1, row 4: O row cu_seqlens_q[2] + 4, LSE index h * total_q + cu_seqlens_q[2] + 4.
    const int64_t token = packed.cu_seqlens_q[2] + 4;
    std::memcpy(static_cast<uint8_t*>(params.o) + (token * o_row + params.o_stride.head) * 2, &kPoisonBits16, 2);
    std::memcpy(&params.lse[params.total_q + token], &kPoisonBits32, 4);
    static_cast<uint8_t*>(params.o)[(token * o_row + 32) * 2] = 0;  // head 0's padding
    return status;
  };
  const RunOutputs out = run_case(packed, unwrite);
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  EXPECT_EQ(out.unwritten_o, 1);
  EXPECT_EQ(out.unwritten_lse, 1);
  EXPECT_FALSE(out.canaries_intact);
  EXPECT_STREQ(out.damaged_buffer, "O padding");
  EXPECT_TRUE(std::isnan(out.o[static_cast<size_t>(((2 * 4 + 1) * 37 + 4) * 32)]));
  EXPECT_TRUE(std::isnan(out.lse[static_cast<size_t>((2 * 4 + 1) * 37 + 4)]));
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
