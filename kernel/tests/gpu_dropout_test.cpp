// Dropout on the GPU (the general family's forward, the mask-dump kernel, the CUDA-core backward) against the host
// model, which the CPU tests hold to the contract and to a double reference (dropout_model_test.cpp): the dump bit for
// bit, O and the gradients within a sanity tolerance, LSE the undropped one bit for bit, and p = 0 the same bits as no
// dropout.
#include <gtest/gtest.h>

#include "gpu_util.h"

#if defined(FLASHCHECK_HAS_CUDA)

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/backward.h"
#include "flashcheck/host_model.h"
#include "test_problem.h"

namespace flashcheck {
namespace {

using test::DeviceBuffer;
using test::Problem;
using test::ProblemSpec;

constexpr uint64_t kSeed = 0x0123456789abcdefull;
constexpr uint64_t kOffset = (uint64_t{1} << 32) + 5;

const ProblemSpec kSpecs[] = {
    {DType::kF32, 2, 4, 2, 77, 133, 40, Mask::kCausalBottomRight, Layout::kBHSD, 0, 21},
    {DType::kF16, 1, 2, 1, 130, 67, 64, Mask::kNone, Layout::kBSHD, 0, 22},
    {DType::kBF16, 2, 2, 2, 33, 257, 128, Mask::kCausalTopLeft, Layout::kBHSD, 1, 23},
    {DType::kF16, 1, 8, 2, 1, 300, 128, Mask::kNone, Layout::kBSHD, 0, 24},  // a decoding shape
};

// |got - want| allowed between the GPU and the model: fp32 arithmetic in another order and exp2f, then (fp16, bf16)
// one rounding to the dtype that may fall on either side.
double tolerance(DType dtype, double want) {
  return 1e-4 * (1.0 + std::fabs(want)) + (dtype == DType::kF32 ? 0.0 : 2.0 * test::dtype_ulp(dtype, want));
}

// The worst (|got - want| - tolerance) over a strided tensor's logical elements; <= 0 passes.
double worst_excess(const Params& p, const std::vector<unsigned char>& got, const std::vector<unsigned char>& want,
                    const Strides& st, int64_t heads, int64_t rows, int64_t columns) {
  double e = -INFINITY;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t s = 0; s < rows; ++s)
        for (int64_t d = 0; d < columns; ++d) {
          const double w = Problem::get(p, want, st, b, h, s, d), g = Problem::get(p, got, st, b, h, s, d);
          e = std::max(e, std::isnan(g) != std::isnan(w) ? INFINITY
                          : std::isnan(g)               ? -INFINITY
                                                        : std::fabs(g - w) - tolerance(p.dtype, w));
        }
  return e;
}

// The forward with its dump on the device: O, LSE into `pr`, the dump into `mask`.
Status forward_on_device(Problem* pr, std::vector<uint8_t>* mask) {
  DeviceBuffer mask_d;
  const Params& p = pr->params;
  std::vector<unsigned char> poison(static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q * p.seqlen_k), 0xab);
  if (mask != nullptr) {
    if (Status st = mask_d.init(poison); !st.ok()) return st;
  }
  const Status st = test::run_on_device(pr, [&](const Params& dp) {
    Params with_mask = dp;
    with_mask.dropout_mask_out = mask != nullptr ? static_cast<uint8_t*>(mask_d.data()) : nullptr;
    return run(with_mask);
  });
  if (!st.ok() || mask == nullptr) return st;
  std::vector<unsigned char> bytes;
  if (Status read = mask_d.read(&bytes); !read.ok()) return read;
  mask->assign(bytes.begin(), bytes.end());
  return Status::ok_status();
}

TEST(Gpu_Dropout, ForwardAndDumpMatchTheModel) {
  SKIP_WITHOUT_DEVICE();
  for (const ProblemSpec& spec : kSpecs) {
    for (const float p_drop : {0.1f, 0.5f}) {
      Problem gpu, model, undropped;
      for (Problem* pr : {&gpu, &model, &undropped}) {
        test::make_problem(spec, pr);
        pr->params.dropout_p = pr == &undropped ? 0.0f : p_drop;
        pr->params.dropout_seed = kSeed;
        pr->params.dropout_offset = kOffset;
      }
      const std::string what = spec.name() + " p " + std::to_string(p_drop);
      ASSERT_EQ(select_config(gpu.params).path, ComputePath::kGeneralFp32) << what;
      std::vector<uint8_t> gpu_mask, model_mask(static_cast<size_t>(spec.batch * spec.heads_q * spec.seqlen_q *
                                                                    spec.seqlen_k), 0xab);
      const Status st = forward_on_device(&gpu, &gpu_mask);
      ASSERT_TRUE(st.ok()) << what << ": " << st.message();
      model.params.dropout_mask_out = model_mask.data();
      ASSERT_TRUE(run_host_model(model.params).ok()) << what;
      EXPECT_TRUE(gpu_mask == model_mask) << what << ": the dumps differ";
      const Params& p = gpu.params;
      EXPECT_LE(worst_excess(p, gpu.o, model.o, p.o_stride, p.heads_q, p.seqlen_q, value_head_dim(p)), 0.0) << what;
      // LSE is the undropped one: the general kernel's bits without dropout (forced onto the same path).
      HostModelOptions general;
      general.override_config = true;
      general.config = select_config(p);
      ASSERT_TRUE(run_host_model(undropped.params, general).ok()) << what;
      for (size_t row = 0; row < gpu.lse.size(); ++row) {
        EXPECT_NEAR(gpu.lse[row], model.lse[row], 1e-5 * (1.0 + std::fabs(model.lse[row]))) << what << " row " << row;
      }
      EXPECT_EQ(std::memcmp(model.lse.data(), undropped.lse.data(), model.lse.size() * sizeof(float)), 0) << what;
    }
  }
}

TEST(Gpu_Dropout, ZeroProbabilityIsBitIdentical) {
  SKIP_WITHOUT_DEVICE();
  for (const ProblemSpec& spec : kSpecs) {
    Problem off, zero;
    test::make_problem(spec, &off);
    test::make_problem(spec, &zero);
    zero.params.dropout_seed = kSeed;
    zero.params.dropout_offset = kOffset;
    test::expect_same_bits_on_device(&off, &zero, [](const Params& dp) { return run(dp); }, spec.name());
  }
}

// The backward on the device against the model's, from the same forward outputs (the model's O and LSE).
TEST(Gpu_Dropout, BackwardMatchesTheModel) {
  SKIP_WITHOUT_DEVICE();
  for (const ProblemSpec& spec : kSpecs) {
    for (const bool deterministic : {false, true}) {
      Problem pr;
      test::make_problem(spec, &pr);
      Params& p = pr.params;
      p.dropout_p = 0.3f;
      p.dropout_seed = kSeed;
      p.dropout_offset = kOffset;
      ASSERT_TRUE(run_host_model(p).ok());
      std::vector<unsigned char> d_o(pr.o.size(), 0);
      uint64_t index = 0;
      for (int64_t b = 0; b < p.batch; ++b)
        for (int64_t h = 0; h < p.heads_q; ++h)
          for (int64_t s = 0; s < p.seqlen_q; ++s)
            for (int64_t d = 0; d < value_head_dim(p); ++d)
              Problem::set(p, d_o, p.o_stride, b, h, s, d, static_cast<float>(test::hash_uniform(78, index++)));
      std::vector<unsigned char> dq(pr.q.size(), 0xff), dk(pr.k.size(), 0xff), dv(pr.v.size(), 0xff);
      BackwardParams model = make_backward_params(p);
      model.d_o = d_o.data();
      model.dq = dq.data();
      model.dk = dk.data();
      model.dv = dv.data();
      ASSERT_TRUE(run_backward_host_model(model).ok());
      ASSERT_EQ(backward_path(model), ComputePath::kGeneralFp32);

      DeviceBuffer q_d, k_d, v_d, o_d, lse_d, d_o_d, dq_d, dk_d, dv_d;
      for (auto [buffer, bytes] : {std::pair{&q_d, &pr.q}, std::pair{&k_d, &pr.k}, std::pair{&v_d, &pr.v},
                                   std::pair{&o_d, &pr.o}, std::pair{&d_o_d, &d_o}, std::pair{&dq_d, &dq},
                                   std::pair{&dk_d, &dk}, std::pair{&dv_d, &dv}}) {
        ASSERT_TRUE(buffer->init(*bytes).ok());
      }
      ASSERT_TRUE(lse_d.init(test::as_bytes(pr.lse)).ok());
      BackwardParams dev = model;
      dev.deterministic = deterministic;
      dev.forward.q = q_d.data();
      dev.forward.k = k_d.data();
      dev.forward.v = v_d.data();
      dev.forward.o = o_d.data();
      dev.forward.lse = static_cast<float*>(lse_d.data());
      dev.d_o = d_o_d.data();
      dev.dq = dq_d.data();
      dev.dk = dk_d.data();
      dev.dv = dv_d.data();
      const Status st = run_backward(dev);
      ASSERT_TRUE(st.ok()) << st.message();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<unsigned char> dq_gpu, dk_gpu, dv_gpu;
      ASSERT_TRUE(dq_d.read(&dq_gpu).ok());
      ASSERT_TRUE(dk_d.read(&dk_gpu).ok());
      ASSERT_TRUE(dv_d.read(&dv_gpu).ok());
      const std::string what = spec.name() + (deterministic ? " deterministic" : " atomic");
      EXPECT_LE(worst_excess(p, dq_gpu, dq, model.dq_stride, p.heads_q, p.seqlen_q, p.head_dim), 0.0) << what << " dQ";
      EXPECT_LE(worst_excess(p, dk_gpu, dk, model.dk_stride, p.heads_kv, p.seqlen_k, p.head_dim), 0.0) << what << " dK";
      EXPECT_LE(worst_excess(p, dv_gpu, dv, model.dv_stride, p.heads_kv, p.seqlen_k, value_head_dim(p)), 0.0)
          << what << " dV";
    }
  }
}

}  // namespace
}  // namespace flashcheck

#endif  // FLASHCHECK_HAS_CUDA
