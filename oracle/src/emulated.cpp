// emulated_row(): the same-precision reference of the statistical check. One non-tiled pass with the final
// max, at the rounding points of the compute path (see error_model.h): its RMS error against the exact O is
// what that precision can achieve, so a kernel whose RMS error is much larger has lost precision somewhere.
// Where implementations of one path differ, the reference takes the noisier choice, so that every healthy
// implementation stays within kRmsFactor of it: scores as round-to-nearest FMA chains (the tensor cores'
// truncated blocks err less: their bias is common to all scores and cancels in the softmax), P*V on tensor
// cores as Fasi, Higham, Mikaitis and Pranesh (PeerJ CS 2021) measured the hardware: exact products, k at a
// time added to the fp32 accumulator with truncation, a bias that grows with seqlen_k.
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "flashcheck/error_model.h"
#include "fp_emulation.h"
#include "row_view.h"

namespace flashcheck::oracle {
namespace {

// A deterministic stand-in for the GPU exp2's error: uniform in [-kExp2RelErr, kExp2RelErr], keyed by the
// row and the key (splitmix64 finalizer), so the reference is reproducible and its exp2 errors are as
// large as the hardware's may be.
double exp2_error(const RowRef& row, int64_t key) {
  uint64_t z = (static_cast<uint64_t>(row.b) * 0x9e3779b97f4a7c15ull) ^ (static_cast<uint64_t>(row.h) * 0xc2b2ae3d27d4eb4full) ^
               (static_cast<uint64_t>(row.i) * 0x165667b19e3779f9ull) ^ (static_cast<uint64_t>(key) * 0xbf58476d1ce4e5b9ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const double unit = static_cast<double>(z >> 11) * 0x1p-53;  // [0, 1)
  return kExp2RelErr * (2 * unit - 1);
}

}  // namespace

std::vector<double> emulated_row(const Problem& problem, RowRef row, DType dtype, ComputePath path) {
  const detail::RowView view = detail::view_row(problem, row);
  const int64_t dim = view.head_dim, n = view.visible;
  std::vector<double> out(static_cast<size_t>(dim), 0.0);
  if (n == 0) return out;

  // The inputs are dtype values: exact as float.
  const auto floats = [](const double* x, int64_t count) { return std::vector<float>(x, x + count); };
  const detail::Operands q = detail::make_operands(floats(view.q, dim), path);
  const detail::Operands k = detail::make_operands(floats(view.k, n * dim), path);
  const detail::Operands v = detail::make_operands(floats(view.v, n * dim), path);
  // x_j = fl(s_j * fl(scale * log2 e)), m = max_j x_j, p_j = fl(exp2(fl(x_j - m))) with the modelled error.
  const float scale_log2 = static_cast<float>(view.scale) * detail::kLog2eF;
  std::vector<float> x(static_cast<size_t>(n));
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    x[static_cast<size_t>(j)] =
        detail::dot_fp32(q, 0, k, static_cast<size_t>(j * dim), dim, path, detail::DotRounding::kNearestChain) * scale_log2;
    m = std::fmax(m, x[static_cast<size_t>(j)]);
  }
  if (m == -std::numeric_limits<float>::infinity()) return out;  // no usable key: O = 0
  std::vector<float> p(static_cast<size_t>(n));
  float l = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    const double arg = static_cast<double>(x[static_cast<size_t>(j)] - m);
    p[static_cast<size_t>(j)] = static_cast<float>(std::exp2(arg) * (1 + exp2_error(row, j)));
    l += p[static_cast<size_t>(j)];  // l takes fp32 P, before any rounding for P*V
  }
  if (path == ComputePath::kTensorCore) {
    for (float& pj : p) pj = detail::round_to_dtype(dtype, pj);
  }
  std::vector<float> acc(static_cast<size_t>(dim), 0.0f);
  detail::accumulate_pv(acc.data(), detail::make_operands(std::move(p), path), v, 0, n, dim, path);
  for (int64_t d = 0; d < dim; ++d) {
    out[static_cast<size_t>(d)] = detail::round_to_dtype(dtype, acc[static_cast<size_t>(d)] / l);
  }
  return out;
}

}  // namespace flashcheck::oracle
