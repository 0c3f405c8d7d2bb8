// The inference path on the GPU (attention.h, "Sequences"): the decode, general and tensor-core families against the
// host model on varlen, paged and split problems with NaN in every slot no sequence owns, and the exact relations: a
// paged cache gives the bits of the same keys laid out contiguously (in one family), split runs are deterministic,
// and a decoding step or a prefill of a packed batch gives each sequence's bits alone; V and O of other columns than
// Q and K (head_dim_v) in the general family.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "families.h"
#include "flashcheck/attention.h"
#include "flashcheck/host_model.h"
#include "gpu_util.h"
#include "sequence_problem.h"

namespace flashcheck {
namespace {

using namespace test;

#if defined(FLASHCHECK_HAS_CUDA)
std::vector<unsigned char> bytes_of(const std::vector<int32_t>& v) {
  std::vector<unsigned char> b(v.size() * sizeof(int32_t));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Runs `host` on the device (every buffer copied, canary-fenced) and returns O and LSE in a copy of it.
Status run_gpu(const Buffers& host, Buffers* out) {
  DeviceBuffer q, k, v, o, lse, cu_q, cu_k, used, pages;
  for (auto [buffer, bytes] : {std::pair{&q, &host.q}, std::pair{&k, &host.k}, std::pair{&v, &host.v},
                               std::pair{&o, &host.o}}) {
    if (Status st = buffer->init(*bytes); !st.ok()) return st;
  }
  if (Status st = lse.init(as_bytes(host.lse)); !st.ok()) return st;
  for (auto [buffer, ints] : {std::pair{&cu_q, &host.cu_q}, std::pair{&cu_k, &host.cu_k}, std::pair{&used, &host.used},
                              std::pair{&pages, &host.pages}}) {
    if (Status st = buffer->init(bytes_of(*ints)); !st.ok()) return st;
  }
  Params p = host.params;
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.o = o.data();
  p.lse = static_cast<float*>(lse.data());
  if (p.cu_seqlens_q != nullptr) p.cu_seqlens_q = static_cast<const int32_t*>(cu_q.data());
  if (p.cu_seqlens_k != nullptr) p.cu_seqlens_k = static_cast<const int32_t*>(cu_k.data());
  if (p.seqused_k != nullptr) p.seqused_k = static_cast<const int32_t*>(used.data());
  if (p.page_table != nullptr) p.page_table = static_cast<const int32_t*>(pages.data());
  if (Status st = run(p); !st.ok()) return st;
  if (Status st = cuda_status(cudaDeviceSynchronize(), "kernel execution"); !st.ok()) return st;
  out->o.clear();
  std::vector<unsigned char> lse_bytes;
  if (Status st = o.read(&out->o); !st.ok()) return st;
  if (Status st = lse.read(&lse_bytes); !st.ok()) return st;
  out->lse.resize(lse_bytes.size() / 4);
  std::memcpy(out->lse.data(), lse_bytes.data(), lse_bytes.size());
  for (auto [buffer, bytes] : {std::pair{&k, &host.k}, std::pair{&v, &host.v}}) {
    std::vector<unsigned char> after;
    if (Status st = buffer->read(&after); !st.ok()) return st;
    if (after != *bytes) return {StatusCode::kCudaError, "an input tensor changed during the run"};
  }
  return Status::ok_status();
}

float element(DType dtype, const std::vector<unsigned char>& buf, int64_t i) {
  Params p;
  p.dtype = dtype;
  return Problem::get(p, buf, {0, 0, 1}, 0, 0, i, 0);
}

struct Case {
  DType dtype;
  Mask mask;
  bool decoding;
  int64_t extra;
  int64_t page;
  int32_t splits;
  std::string name() const {
    return std::string(to_string(dtype)) + " " + to_string(mask) + (decoding ? " decode" : " prefill") + " extra=" +
           std::to_string(extra) + " page=" + std::to_string(page) + " splits=" + std::to_string(splits);
  }
};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (DType dtype : {DType::kF16, DType::kBF16, DType::kF32})
    for (Mask mask : {Mask::kNone, Mask::kCausalBottomRight, Mask::kWindowBottomRight})
      for (bool decoding : {true, false})
        for (int64_t page : {int64_t{0}, int64_t{3}, int64_t{16}})
          for (int32_t splits : {1, 3, 0}) all.push_back({dtype, mask, decoding, page == 3 ? 2 : 0, page, splits});
  return all;
}
#endif  // FLASHCHECK_HAS_CUDA

TEST(GpuSequences, MatchHostModelWithNanOutsideEverySequence) {
  SKIP_WITHOUT_DEVICE();
#if defined(FLASHCHECK_HAS_CUDA)
  constexpr int64_t d = 64;
  int64_t checked = 0;
  for (const Case& c : cases()) {
    Buffers host, gpu;
    build_packed(c.dtype, d, c.mask, c.decoding ? kDecodeSeqs : kSeqs, c.extra, c.page, c.splits, &host);
    const Status st = run_gpu(host, &gpu);
    ASSERT_TRUE(st.ok()) << c.name() << ": " << st.message();
    ASSERT_TRUE(run_host_model(host.params).ok()) << c.name();
    const double tol = c.dtype == DType::kF32 ? 2e-5 : c.dtype == DType::kF16 ? 4e-3 : 3e-2;
    const int64_t n = host.params.total_q * kHeadsQ * d;
    for (int64_t i = 0; i < n; ++i) {
      const float a = element(c.dtype, gpu.o, i), m = element(c.dtype, host.o, i);
      ASSERT_TRUE(std::isfinite(a)) << c.name() << ": O element " << i << " = " << a;
      ASSERT_NEAR(a, m, tol) << c.name() << ": O element " << i;
    }
    for (size_t i = 0; i < host.lse.size() && i < static_cast<size_t>(kHeadsQ * host.params.total_q); ++i) {
      if (std::isinf(host.lse[i])) {
        ASSERT_EQ(gpu.lse[i], host.lse[i]) << c.name() << ": LSE " << i;
      } else {
        ASSERT_NEAR(gpu.lse[i], host.lse[i], 1e-3) << c.name() << ": LSE " << i;
      }
    }
    ++checked;
  }
  RecordProperty("cases", std::to_string(checked));
#endif
}

TEST(GpuSequences, PagedGivesTheBitsOfContiguousAndSplitsAreDeterministic) {
  SKIP_WITHOUT_DEVICE();
#if defined(FLASHCHECK_HAS_CUDA)
  constexpr int64_t d = 128;
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (bool decoding : {true, false}) {
      for (int32_t splits : {1, 5}) {
        const auto& seqs = decoding ? kDecodeSeqs : kSeqs;
        Buffers contiguous, reference;
        build_packed(dtype, d, Mask::kCausalBottomRight, seqs, 0, 0, splits, &contiguous);
        ASSERT_TRUE(run_gpu(contiguous, &reference).ok());
        for (int64_t page : {int64_t{1}, int64_t{3}, int64_t{16}, int64_t{64}}) {
          Buffers paged, out;
          build_packed(dtype, d, Mask::kCausalBottomRight, seqs, 1, page, splits, &paged);
          const Status st = run_gpu(paged, &out);
          ASSERT_TRUE(st.ok()) << st.message();
          const std::string what = std::string(to_string(dtype)) + " page " + std::to_string(page) + " splits " +
                                   std::to_string(splits);
          if (std::string(select_config(paged.params).name) == select_config(contiguous.params).name) {
            EXPECT_EQ(out.o, reference.o) << what;
            EXPECT_EQ(0, std::memcmp(out.lse.data(), reference.lse.data(), out.lse.size() * 4)) << what;
          } else {  // an unsplit contiguous prefill runs on the tensor cores, its paged twin in the general family
            const double tol = dtype == DType::kF16 ? 4e-3 : 3e-2;
            for (int64_t i = 0; i < paged.params.total_q * kHeadsQ * d; ++i)
              ASSERT_NEAR(element(dtype, out.o, i), element(dtype, reference.o, i), tol) << what << ": O element " << i;
          }
        }
        Buffers again;
        ASSERT_TRUE(run_gpu(contiguous, &again).ok());
        EXPECT_EQ(again.o, reference.o) << "a rerun with splits " << splits;
      }
    }
  }
#endif
}

TEST(GpuSequences, DecodingStepOfAPackedBatchEqualsEachSequenceAlone) {
  SKIP_WITHOUT_DEVICE();
#if defined(FLASHCHECK_HAS_CUDA)
  constexpr int64_t d = 128;
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    Buffers packed, out;
    build_packed(dtype, d, Mask::kCausalBottomRight, kDecodeSeqs, 0, 16, 1, &packed);
    ASSERT_STREQ(select_config(packed.params).name, dtype == DType::kBF16 ? "decode_bf16_hdim128" : "decode_f16_hdim128");
    ASSERT_TRUE(run_gpu(packed, &out).ok());
    out.cu_q = packed.cu_q;
    out.params = packed.params;
    for (size_t b = 0; b < kDecodeSeqs.size(); ++b) {
      if (kDecodeSeqs[b].q == 0) continue;
      Buffers alone, alone_out;
      build_dense(dtype, d, Mask::kCausalBottomRight, kDecodeSeqs[b], static_cast<int64_t>(b), &alone);
      ASSERT_TRUE(run_gpu(alone, &alone_out).ok());
      expect_same_rows(out, alone_out, static_cast<int64_t>(b), kDecodeSeqs[b], d, to_string(dtype));
    }
  }
#endif
}

// A prefill of a packed batch on the tensor-core family, on its warp-specialized kernel (TMA: rows past a sequence are
// the next sequence's or NaN slots past seqused_k, not zeros) and on its cp.async kernel: every row is the bits of
// its sequence run alone as a dense problem, for partial Q and K/V tiles, empty sequences and sequences without keys.
// Every sequence has more than 8 rows, so that alone it is no decoding step (the decode family's bits differ).
TEST(GpuSequences, PrefillOfAPackedBatchOnTheTensorCoresEqualsEachSequenceAlone) {
  SKIP_WITHOUT_DEVICE();
  SKIP_WITHOUT_TENSOR_CORE();
#if defined(FLASHCHECK_HAS_CUDA) && defined(FLASHCHECK_HAS_TENSOR_CORE)
  const std::vector<SeqLens> seqs{{9, 100}, {0, 7}, {17, 17}, {33, 300}, {64, 0}, {129, 257}, {12, 1}, {200, 129}};
  int64_t checked = 0;
  for (DType dtype : {DType::kBF16, DType::kF16})
    for (int64_t d : {int64_t{40}, int64_t{64}, int64_t{128}, int64_t{256}})
      for (Mask mask : {Mask::kNone, Mask::kCausalBottomRight, Mask::kWindowBottomRight})
        for (int64_t extra : {int64_t{0}, int64_t{3}})
          for (bool cp_async : {false, true}) {
            const std::string what = std::string(to_string(dtype)) + " d=" + std::to_string(d) + " " +
                                     to_string(mask) + " extra=" + std::to_string(extra) +
                                     (cp_async ? " cp.async" : " warp-specialized");
            Buffers packed, out;
            build_packed(dtype, d, mask, seqs, extra, 0, 1, &packed);
            const std::string family = select_config(packed.params).name;
            ASSERT_EQ(family.rfind("tensor_core", 0), 0u) << what << ": " << family;
            detail::tensor_core_force_cp_async(cp_async);
            Status st = run_gpu(packed, &out);
            for (size_t b = 0; st.ok() && b < seqs.size(); ++b) {
              if (seqs[b].q == 0) continue;
              Buffers alone, alone_out;
              build_dense(dtype, d, mask, seqs[b], static_cast<int64_t>(b), &alone);
              ASSERT_EQ(family, select_config(alone.params).name) << what << ": sequence " << b << " alone";
              st = run_gpu(alone, &alone_out);
              if (!st.ok()) break;
              out.cu_q = packed.cu_q;
              out.params = packed.params;
              expect_same_rows(out, alone_out, static_cast<int64_t>(b), seqs[b], d, what);
            }
            detail::tensor_core_force_cp_async(false);
            ASSERT_TRUE(st.ok()) << what << ": " << st.message();
            if (HasFatalFailure()) return;
            ++checked;
          }
  RecordProperty("cases", std::to_string(checked));
#endif
}

// V and O of other columns than Q and K (head_dim_v) on the inference path: varlen Q with packed K/V (fp16/bf16
// value pairs: the tensor-core family) or paged K/V (the general family; NaN past every sequence), prefill and
// decoding shapes, unsplit and in three runs, against the host model; a paged cache gives the bits of the packed one
// where both run in one family.
TEST(GpuSequences, UnequalHeadDimsMatchTheModelAndPagedGivesTheBitsOfPacked) {
  SKIP_WITHOUT_DEVICE();
#if defined(FLASHCHECK_HAS_CUDA)
  int64_t checked = 0;
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (const auto& [d, dv] : kUnequalHeadDims) {
      for (const bool decoding : {true, false}) {
        for (const int32_t splits : {1, 3}) {
          const std::string base = std::string(to_string(dtype)) + " d=" + std::to_string(d) + " dv=" +
                                   std::to_string(dv) + (decoding ? " decode" : " prefill") + " splits=" +
                                   std::to_string(splits);
          Buffers packed_out;
          for (const int64_t page : {int64_t{0}, int64_t{3}, int64_t{16}}) {
            const std::string what = base + " page=" + std::to_string(page);
            Buffers host, gpu;
            build_packed(dtype, d, Mask::kCausalBottomRight, decoding ? kDecodeSeqs : kSeqs, 2, page, splits, &host,
                         dv);
            const KernelConfig config = select_config(host.params);
            ASSERT_EQ(config.path, page == 0 && tensor_core_pair(dtype, d, dv) ? ComputePath::kTensorCore
                                                                            : ComputePath::kGeneralFp32)
                << what;
            const Status st = run_gpu(host, &gpu);
            ASSERT_TRUE(st.ok()) << what << ": " << st.message();
            ASSERT_TRUE(run_host_model(host.params).ok()) << what;
            const double tol = dtype == DType::kF32 ? 2e-5 : dtype == DType::kF16 ? 4e-3 : 3e-2;
            const int64_t n = host.params.total_q * kHeadsQ * dv;
            for (int64_t i = 0; i < n; ++i) {
              const float a = element(dtype, gpu.o, i), m = element(dtype, host.o, i);
              ASSERT_TRUE(std::isfinite(a)) << what << ": O element " << i << " = " << a;
              ASSERT_NEAR(a, m, tol) << what << ": O element " << i;
            }
            for (int64_t i = 0; i < kHeadsQ * host.params.total_q; ++i) {
              if (std::isinf(host.lse[i])) {
                ASSERT_EQ(gpu.lse[i], host.lse[i]) << what << ": LSE " << i;
              } else {
                ASSERT_NEAR(gpu.lse[i], host.lse[i], 1e-3) << what << ": LSE " << i;
              }
            }
            if (page == 0) {
              packed_out = std::move(gpu);
            } else if (!tensor_core_pair(dtype, d, dv)) {
              EXPECT_EQ(gpu.o, packed_out.o) << what;
              EXPECT_EQ(0, std::memcmp(gpu.lse.data(), packed_out.lse.data(), gpu.lse.size() * 4)) << what;
            }
            ++checked;
          }
        }
      }
    }
  }
  RecordProperty("cases", std::to_string(checked));
#endif
}

TEST(GpuSequences, BatchesOfEmptySequencesAreNoOps) {
  SKIP_WITHOUT_DEVICE();
#if defined(FLASHCHECK_HAS_CUDA)
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (int32_t splits : {1, 3, 0}) {
      Buffers host, out;
      build_packed(dtype, 8, Mask::kCausalBottomRight, {{0, 1427}, {0, 1}}, 0, 256, splits, &host);
      const Status st = run_gpu(host, &out);
      EXPECT_TRUE(st.ok()) << to_string(dtype) << " splits " << splits << ": " << st.message();
    }
  }
#endif
}

TEST(GpuSequences, MalformedIndexArraysInDeviceMemoryAreRejected) {
  SKIP_WITHOUT_DEVICE();
#if defined(FLASHCHECK_HAS_CUDA)
  Buffers host, out;
  build_packed(DType::kBF16, 64, Mask::kNone, kDecodeSeqs, 0, 16, 1, &host);
  host.pages[0] = static_cast<int32_t>(host.params.num_pages);  // sequence 0 reads its first page
  const Status st = run_gpu(host, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("page_table[0, 0]"), std::string::npos) << st.message();
#endif
}

}  // namespace
}  // namespace flashcheck
