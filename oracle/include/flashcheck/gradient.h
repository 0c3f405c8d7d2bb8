// The exact gradient of attention (oracle.h's forward, its semantics included) with respect to Q, K, V and the sink
// logits, for a given dO: the reference of the backward pass. Host-only, written from the math, in the gold tier's
// 113-bit arithmetic (cpp_bin_float_quad), every sum over keys or rows in one accumulator, rounded to double once.
//
// Notation (per row (b, h, i) of the problem; j over the row's visible keys, t = scale * q_i.k_j the raw score):
//   s_ij = t_ij, or c tanh(t_ij / c) with a softcap c;   lse_i = log(sum_j e^(s_ij) + e^(sink_h));
//   P_ij = e^(s_ij - lse_i), P_i,sink = e^(sink_h - lse_i);   O_i = sum_j P_ij v_j;
//   dV_j = sum_i P_ij dO_i;   dP_ij = dO_i.v_j;   D_i = dO_i.O_i = sum_j P_ij dP_ij;
//   dS_ij = P_ij (dP_ij - D_i);   dT_ij = dS_ij (1 - (s_ij / c)^2) with a softcap, else dS_ij;
//   dQ_i = scale sum_j dT_ij k_j;   dK_j = scale sum_i dT_ij q_i;   dsink_h = -sum_(b,i) P_i,sink D_i.
// Sums over i run over every query head of the K/V head's group (GQA) and, for the sink, over every sequence.
// A row with no usable key and no sink has P = 0: it adds nothing and its dQ is 0; a sink of +inf takes all the
// weight (O = 0, D = 0) and nothing flows back either. Where the row's Q or dO, a K or V row it sees, or its sink
// holds inf or NaN (a sink of -inf is none), the gradients it touches are NaN ("must be non-finite"): its dQ and D,
// dK and dV of every key it sees, and its head's sink gradient.
#pragma once

#include <span>
#include <vector>

#include "flashcheck/oracle_problem.h"

namespace flashcheck::oracle {

struct Gradient {
  std::vector<double> dq;     // [batch, heads_q, seqlen_q, head_dim]
  std::vector<double> dk;     // [batch, heads_kv, seqlen_k, head_dim]
  std::vector<double> dv;     // [batch, heads_kv, seqlen_k, value_dim]
  std::vector<double> dsink;  // [heads_q]; empty without a sink
  std::vector<double> d;      // [batch, heads_q, seqlen_q]: D_i = dO_i.O_i, what a backward kernel precomputes
};

// The gradient of sum over (b, h, i, k) of dO_ihk * O_ihk for `problem` (per-sequence lengths, masks, softcap, sink
// and GQA as oracle.h reads them). d_o is [batch, heads_q, seqlen_q, value_dim(problem)], exact doubles; rows past
// a sequence's length are ignored, and their gradients, like those of keys past it, are 0. Throws
// std::invalid_argument naming the field for a d_o of the wrong size, and as compute_row() does for the problem.
// Cost: (batch * heads_q * seqlen_q * seqlen_k) * (2 head_dim + 2 value_dim) 113-bit operations at most.
Gradient exact_gradient(const Problem& problem, std::span<const double> d_o);

}  // namespace flashcheck::oracle
