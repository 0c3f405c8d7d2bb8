// The dropout mask dump (Params::dropout_mask_out): a small kernel of its own, launched by run() after the forward,
// that writes every byte of the [batch, heads_q, seqlen_q, seqlen_k] buffer from the contract
// (docs/design/dropout-rng.md) and the visibility rule (common/visibility.h): 1 where sequence b's row i sees key j
// and the element is kept, 0 where it is dropped, hidden, or past the sequence's seqlen_q(b) or seqlen_k(b). Rows and
// keys are counted within the sequence, seqlen_q and seqlen_k being Params' maxima. It draws through
// device_keep_bits, as the general forward does, so a fault in the shared draw shows in the dump too.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "common/args.h"
#include "common/dropout.cuh"
#include "families.h"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace {

inline constexpr int kMaskThreads = 256;

// One thread per group of four keys of one (b, h, i) row of the buffer, grid-stride: one Philox call per group.
__global__ void __launch_bounds__(kMaskThreads) dropout_mask_kernel(const ProblemArgs a, uint8_t* mask_out) {
  const int64_t groups_per_row = ceil_div(a.seqlen_k, int64_t{kDropoutKeysPerDraw});
  const int64_t total = a.batch * a.heads_q * a.seqlen_q * groups_per_row;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * kMaskThreads + threadIdx.x; g < total;
       g += static_cast<int64_t>(gridDim.x) * kMaskThreads) {
    const int64_t group = g % groups_per_row;
    const int64_t flat_row = g / groups_per_row;  // (b * heads_q + h) * seqlen_q + i
    const int64_t i = flat_row % a.seqlen_q;
    const int64_t h = (flat_row / a.seqlen_q) % a.heads_q;
    const int64_t b = flat_row / (a.seqlen_q * a.heads_q);
    const SequenceView seq = a.sequence(b);
    const bool row_exists = i < seq.seqlen_q;
    const int64_t begin = row_exists ? seq.vis.row_begin(i) : 0, end = row_exists ? seq.vis.row_end(i) : 0;
    const int64_t key0 = group * kDropoutKeysPerDraw;
    const bool any_visible = key0 < end && key0 + kDropoutKeysPerDraw > begin;
    const uint32_t bits = any_visible ? device_keep_bits(a, b, h, i, group, false) : 0u;
    uint8_t* out = mask_out + flat_row * a.seqlen_k;
    for (int w = 0; w < kDropoutKeysPerDraw && key0 + w < a.seqlen_k; ++w) {
      const int64_t j = key0 + w;
      out[j] = j >= begin && j < end && ((bits >> w) & 1u) != 0 ? 1 : 0;
    }
  }
}

}  // namespace

Status dropout_mask_launch(const Params& params, void* stream) {
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  FC_UPLOAD_MUTANT(cuda_stream);
  const ProblemArgs args = make_problem_args(params, 1);
  const int64_t groups = params.batch * params.heads_q * params.seqlen_q *
                         ceil_div(params.seqlen_k, int64_t{kDropoutKeysPerDraw});
  if (groups == 0) return Status::ok_status();
  const int64_t blocks = capped_grid(std::min<int64_t>(ceil_div(groups, int64_t{kMaskThreads}), int64_t{1} << 20));
  dropout_mask_kernel<<<static_cast<unsigned>(blocks), kMaskThreads, 0, cuda_stream>>>(args, params.dropout_mask_out);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return {StatusCode::kCudaError, std::string("dropout mask: kernel launch failed: ") + cudaGetErrorString(err)};
  }
  return Status::ok_status();
}

}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
