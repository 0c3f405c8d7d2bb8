// run_backward_host_model(): the backward kernels' algorithm (backward/kernel.cuh) on the host, with their
// arithmetic (backward/arith.h) in their order: D per row; per (sequence, K/V head, K/V tile) the rows that see the
// tile, every query head of the group in turn, kBlockRows at a time, accumulating dK and dV as FMA chains and each
// row's partial sum of dQ over the tile's keys; dQ's partials added tile after tile; dsink per head over the rows
// in order. exp2 and tanh are the host's (within the kernels' error allowances, not their bits). Dropout regenerates
// the forward's mask (host_dropout.h) and applies it as backward/arith.h's dropout_pair says.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backward/arith.h"
#include "common/args.h"
#include "flashcheck/backward.h"
#include "flashcheck/host_model.h"
#include "host_dropout.h"
#include "host_numeric.h"

namespace flashcheck {
namespace {

using detail::host::load_element;
using detail::host::store_element;
namespace bw = detail::backward;

// Element offsets of row i of (sequence b, head h): Q-like tensors (Q, O, dO, dQ) and K-like ones (K, V, dK, dV),
// packed or dense as the params say.
int64_t q_offset(const bw::Args& a, const Strides& s, int64_t b, int64_t h, int64_t i) {
  return a.cu_q != nullptr ? h * s.head + (a.cu_q[b] + i) * s.row : b * s.batch + h * s.head + i * s.row;
}
int64_t k_offset(const bw::Args& a, const Strides& s, int64_t b, int64_t h, int64_t j) {
  return a.cu_k != nullptr ? h * s.head + (a.cu_k[b] + j) * s.row : b * s.batch + h * s.head + j * s.row;
}

}  // namespace

Status run_backward_host_model(const BackwardParams& bp, const HostModelOptions& options) {
  if (Status st = can_implement_backward(bp); !st.ok()) return st;
  const Params& p = bp.forward;
  if (p.batch == 0 || p.heads_q == 0) {  // no rows: dsink (a sum over them) is 0, nothing else exists
    if (bp.dsink != nullptr) std::fill(bp.dsink, bp.dsink + p.heads_q, 0.0f);
    return Status::ok_status();
  }
  bw::Args a;
  static_cast<detail::ProblemArgs&>(a) = detail::make_problem_args(p, bw::kBlockRows);
  const ModelDefect defect = options.defect;
  const DType dt = p.dtype;
  const int64_t dim = p.head_dim, dim_v = value_head_dim(p), group = p.heads_q / p.heads_kv;
  const auto exp2 = [](float e) { return std::exp2(e); };
  const float* lse = p.lse;
  const detail::host::ModelDropout dropout = detail::host::model_dropout(p, defect, true);

  // D = dO.O per row, and dQ's accumulators.
  std::vector<float> d(static_cast<size_t>(a.lse_rows), 0.0f);
  std::vector<float> dq_acc(static_cast<size_t>(a.lse_rows * dim), 0.0f);
  for (int64_t b = 0; b < p.batch; ++b) {
    const detail::SequenceView seq = a.sequence(b);
    for (int64_t h = 0; h < p.heads_q; ++h) {
      for (int64_t i = 0; i < seq.seqlen_q; ++i) {
        const int64_t o_at = q_offset(a, p.o_stride, b, h, i), g_at = q_offset(a, bp.d_o_stride, b, h, i);
        float acc = 0.0f;
        for (int64_t c = 0; c < dim_v; ++c) {
          acc = std::fma(load_element(dt, bp.d_o, g_at + c), load_element(dt, p.o, o_at + c), acc);
        }
        d[static_cast<size_t>(a.row_block(b, h) + i)] = acc;
      }
    }
  }

  std::vector<float> k_tile(static_cast<size_t>(bw::kBlockKeys * dim)), v_tile(static_cast<size_t>(bw::kBlockKeys * dim_v));
  std::vector<float> q_rows(static_cast<size_t>(bw::kBlockRows * dim)), g_rows(static_cast<size_t>(bw::kBlockRows * dim_v));
  std::vector<float> dk(static_cast<size_t>(bw::kBlockKeys * dim)), dv(static_cast<size_t>(bw::kBlockKeys * dim_v));
  std::vector<float> pt(bw::kBlockRows * bw::kBlockKeys), dtt(bw::kBlockRows * bw::kBlockKeys);
  for (int64_t b = 0; b < p.batch; ++b) {
    const detail::SequenceView seq = a.sequence(b);
    const int64_t capacity = a.key_capacity(b);
    for (int64_t h_kv = 0; h_kv < p.heads_kv; ++h_kv) {
      for (int64_t k0 = 0; k0 < capacity; k0 += bw::kBlockKeys) {
        const int64_t slots = std::min<int64_t>(bw::kBlockKeys, capacity - k0);
        const int64_t keys = bw::keys_in_tile(seq.seqlen_k, k0);
        for (int64_t j = 0; j < keys; ++j) {
          const int64_t k_at = k_offset(a, p.k_stride, b, h_kv, k0 + j), v_at = k_offset(a, p.v_stride, b, h_kv, k0 + j);
          for (int64_t c = 0; c < dim; ++c) k_tile[static_cast<size_t>(j * dim + c)] = load_element(dt, p.k, k_at + c);
          for (int64_t c = 0; c < dim_v; ++c) v_tile[static_cast<size_t>(j * dim_v + c)] = load_element(dt, p.v, v_at + c);
        }
        std::fill(dk.begin(), dk.end(), 0.0f);
        std::fill(dv.begin(), dv.end(), 0.0f);
        const bw::RowSpan span = keys > 0 ? bw::rows_seeing(seq.vis, k0, k0 + keys) : bw::RowSpan{};
        const int64_t heads = defect == ModelDefect::kBwdGqaGroupShort ? group - 1 : group;
        for (int64_t g = 0; g < heads; ++g) {
          const int64_t h = h_kv * group + g;
          for (int64_t i0 = span.begin; i0 < span.end; i0 += bw::kBlockRows) {
            const int64_t rows = std::min<int64_t>(bw::kBlockRows, span.end - i0);
            const auto sees = [&](int64_t r, int64_t j) { return r < rows && j < keys && seq.vis.sees(i0 + r, k0 + j); };
            for (int64_t r = 0; r < rows; ++r) {
              const int64_t q_at = q_offset(a, p.q_stride, b, h, i0 + r), g_at = q_offset(a, bp.d_o_stride, b, h, i0 + r);
              for (int64_t c = 0; c < dim; ++c) q_rows[static_cast<size_t>(r * dim + c)] = load_element(dt, p.q, q_at + c);
              for (int64_t c = 0; c < dim_v; ++c) g_rows[static_cast<size_t>(r * dim_v + c)] = load_element(dt, bp.d_o, g_at + c);
            }
            for (int64_t r = 0; r < rows; ++r) {
              const int64_t i = i0 + r;
              const int64_t lse_i = defect == ModelDefect::kBwdLseWrongRow && i + 1 < seq.seqlen_q ? i + 1 : i;
              const float lse2 = bw::lse_log2(lse[a.row_block(b, h) + lse_i]);
              const float d_i = defect == ModelDefect::kBwdDsWithoutD ? 0.0f : d[static_cast<size_t>(a.row_block(b, h) + i)];
              const bool cap = a.has_softcap && defect != ModelDefect::kBwdSoftcapDerivativeDropped;
              for (int64_t j = 0; j < keys; ++j) {
                const bool visible = sees(r, j);
                const bool leak = defect == ModelDefect::kBwdHiddenKeysInDq && k0 + j < seq.seqlen_k;
                float p_ij = 0.0f, dt_ij = 0.0f;
                if (visible || leak) {
                  float dot = 0.0f, dp = 0.0f;
                  for (int64_t c = 0; c < dim; ++c) dot = std::fma(q_rows[static_cast<size_t>(r * dim + c)], k_tile[static_cast<size_t>(j * dim + c)], dot);
                  for (int64_t c = 0; c < dim_v; ++c) dp = std::fma(g_rows[static_cast<size_t>(r * dim_v + c)], v_tile[static_cast<size_t>(j * dim_v + c)], dp);
                  const bw::Score s = bw::score_log2(dot, a);
                  p_ij = bw::weight(s.x, lse2, exp2);
                  float w_ij = p_ij;
                  if (dropout.enabled) {
                    const bw::DroppedPair dropped = bw::dropout_pair(p_ij, dp, dropout.keeps(b, h, i, k0 + j), dropout.keep_scale);
                    w_ij = dropped.w;
                    dp = dropped.dp;
                  }
                  dt_ij = bw::score_grad(p_ij, dp, d_i, s.t, cap);
                  p_ij = w_ij;
                }
                pt[static_cast<size_t>(r * bw::kBlockKeys + j)] = visible ? p_ij : 0.0f;
                dtt[static_cast<size_t>(r * bw::kBlockKeys + j)] = dt_ij;
              }
            }
            for (int64_t j = 0; j < keys; ++j) {
              for (int64_t r = 0; r < rows; ++r) {
                if (!sees(r, j)) continue;
                const float w_ij = pt[static_cast<size_t>(r * bw::kBlockKeys + j)];  // P, or dropout's w
                const float dt_ij = dtt[static_cast<size_t>(r * bw::kBlockKeys + j)];
                for (int64_t c = 0; c < dim_v; ++c) {
                  float& acc = dv[static_cast<size_t>(j * dim_v + c)];
                  acc = std::fma(w_ij, g_rows[static_cast<size_t>(r * dim_v + c)], acc);
                }
                for (int64_t c = 0; c < dim; ++c) {
                  float& acc = dk[static_cast<size_t>(j * dim + c)];
                  acc = std::fma(dt_ij, q_rows[static_cast<size_t>(r * dim + c)], acc);
                }
              }
            }
            // Each row's partial sum of dQ over the tile, added to its accumulator (atomically on the GPU).
            for (int64_t r = 0; r < rows; ++r) {
              const int64_t i = i0 + r;
              const bool leak = defect == ModelDefect::kBwdHiddenKeysInDq;
              bool any = false;
              for (int64_t j = 0; j < keys; ++j) any = any || sees(r, j);
              if (!any) continue;
              const auto tile_of = [](int64_t key) { return key / bw::kBlockKeys * bw::kBlockKeys; };
              if (defect == ModelDefect::kBwdDqMissingTile && k0 == tile_of(seq.vis.row_end(i) - 1) &&
                  k0 > tile_of(seq.vis.row_begin(i))) {
                continue;
              }
              float* acc = dq_acc.data() + (a.row_block(b, h) + i) * dim;
              for (int64_t c = 0; c < dim; ++c) {
                float part = 0.0f;
                for (int64_t j = 0; j < keys; ++j) {
                  if (!sees(r, j) && !(leak && k0 + j < seq.seqlen_k)) continue;
                  part = std::fma(dtt[static_cast<size_t>(r * bw::kBlockKeys + j)], k_tile[static_cast<size_t>(j * dim + c)], part);
                }
                acc[c] += part;
              }
            }
          }
        }
        const int64_t written = defect == ModelDefect::kBwdPaddedTailNotZeroed ? keys : slots;
        const float dk_scale = defect == ModelDefect::kBwdDkScaleMissing ? 1.0f : p.softmax_scale;
        for (int64_t j = 0; j < written; ++j) {
          const int64_t k_at = k_offset(a, bp.dk_stride, b, h_kv, k0 + j), v_at = k_offset(a, bp.dv_stride, b, h_kv, k0 + j);
          for (int64_t c = 0; c < dim; ++c) store_element(dt, bp.dk, k_at + c, detail::mul_rn(dk[static_cast<size_t>(j * dim + c)], dk_scale));
          for (int64_t c = 0; c < dim_v; ++c) store_element(dt, bp.dv, v_at + c, dv[static_cast<size_t>(j * dim_v + c)]);
        }
      }
    }
  }
  for (int64_t b = 0; b < p.batch; ++b) {
    const detail::SequenceView seq = a.sequence(b);
    for (int64_t h = 0; h < p.heads_q; ++h) {
      for (int64_t i = 0; i < seq.seqlen_q; ++i) {
        const float* acc = dq_acc.data() + (a.row_block(b, h) + i) * dim;
        const int64_t at = q_offset(a, bp.dq_stride, b, h, i);
        for (int64_t c = 0; c < dim; ++c) store_element(dt, bp.dq, at + c, detail::mul_rn(acc[c], p.softmax_scale));
      }
    }
  }
  if (bp.dsink != nullptr) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      float acc = 0.0f;
      for (int64_t b = 0; b < p.batch; ++b) {
        const detail::SequenceView seq = a.sequence(b);
        for (int64_t i = 0; i < seq.seqlen_q; ++i) {
          const int64_t row = a.row_block(b, h) + i;
          acc += bw::sink_term(p.sink[h], bw::lse_log2(lse[row]), d[static_cast<size_t>(row)], exp2);
        }
      }
      bp.dsink[h] = acc;
    }
  }
  return Status::ok_status();
}

}  // namespace flashcheck
