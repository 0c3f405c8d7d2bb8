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
// weight (O = 0, D = 0) and nothing flows back either. Where a row that sees keys has inf or NaN in its Q or dO, in a
// K or V row it sees, or as its sink (a sink of -inf is none), the gradients it touches are NaN ("must be
// non-finite"): its dQ and D, dK and dV of every key it sees, and its head's sink gradient. A row that sees no key
// depends on no q: its dQ is 0 whatever Q holds, and a non-finite dO (through D) or a NaN sink reach only the sink's
// gradient.
// Under a dropout (Problem::dropout, p > 0; z_ij the keep decision of dropout.h, sigma = 1 / (1 - p)) the kept weights
// P_ij z_ij sigma take P's place where V is weighted, and P stays the undropped softmax everywhere else:
//   O_i = sum_j P_ij z_ij sigma v_j;   dV_j = sum_i P_ij z_ij sigma dO_i;   dP'_ij = z_ij sigma dO_i.v_j;
//   D_i = dO_i.O_i = sum_j P_ij dP'_ij;   dS_ij = P_ij (dP'_ij - D_i);
// dT, dQ, dK and dsink follow from dS and D as above. A dropped key's V row is not read (a non-finite value there
// reaches nothing).
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

// Where a backward kernel rounds (docs/error-model.md §10, "The backward pass"):
//   kGeneralFp32  scores, P, dP, D, dS and every sum in fp32, rounded to nearest;
//   kTensorCore   the same, with P rounded to `format` before dV = P^T dO and dS (after the softcap's factor) before
//                 dQ = dS K and dK = dS^T Q, and the GEMMs' fp32 accumulation truncating (one ulp per rounding).
// Either way the kernel recomputes x = fl(fl(q.k) fl(scale log2 e)) (with a softcap fl(c log2 e) tanh(fl(q.k
// fl(scale / c)))) and P = exp2(fl(x - fl(LSE log2 e))) from the forward's LSE, D = dO.O from the forward's O, dQ
// and dK as fl(scale * sum), and rounds dQ, dK, dV to `format` once; dsink stays fp32.
// A dropout runs on kGeneralFp32 only (docs/error-model.md §10.8): with s32 = fl32(1 / (1 - p)), a kept pair's
// w = fl(P s32) weighs dO in dV and dP' = fl(dP s32) enters dS = fl(P fl(dP' - D)); a dropped pair's w and dP' are 0.
struct BackwardArithmetic {
  Arithmetic arithmetic = Arithmetic::kGeneralFp32;
  Format format = Format::kF32;  // of Q, K, V, O, dO, and of dQ, dK, dV
};

// What a backward kernel reads besides the problem and dO: the forward's O as it was written (in the problem's
// format, decoded; [batch, heads_q, seqlen_q, value_dim]) and its LSE (fp32 values; [batch, heads_q, seqlen_q]).
// Their distance from the exact O and LSE enters the bound as measured, not as the forward's worst case.
struct ForwardResult {
  std::span<const double> o;
  std::span<const double> lse;
};

// The gradient in the fast tier (double, the forward's fast tier for O and LSE) and a bound on each element of
// |kernel - exact| for a kernel of `arithmetic` given `forward`: the first-order propagation of every rounding the
// kernel makes (docs/error-model.md §10), with the forward's measured errors of O and LSE carried in, any summation
// order (atomics included) covered, the fast tier's own error added. An element whose bound is +inf carries no
// claim: a row whose given O or LSE is non-finite where the exact one is finite (the forward failed there), and the
// keys and sink it reaches; fp32 overflow on the way, dS past the format's range where the class rounds it to the
// format (kTensorCore: that row's dQ and that key's dK), or a gradient past the format's range; and every element a
// non-finite input reaches (exact: NaN), since whether a key of zero weight (a score of -inf) multiplies its inf
// into a NaN is the kernel's order of operations, not the math's.
struct GradientCheck {
  Gradient exact;                         // NaN: must be non-finite (gradient.h's semantics)
  std::vector<double> dq, dk, dv, dsink;  // bounds, shaped like exact's
  // The largest summation lengths met: keys of a row (dQ), rows of a key over its group (dK, dV), rows of a head
  // (dsink). For the report.
  int64_t max_keys = 0, max_rows = 0;
};
// A problem under a dropout with another arithmetic than kGeneralFp32 throws std::invalid_argument; p = 0 is no
// dropout, bit for bit.
GradientCheck gradient_check(const Problem& problem, std::span<const double> d_o, const ForwardResult& forward,
                             const BackwardArithmetic& arithmetic);

// A same-precision reference of the backward pass: the straightforward, untiled gradient a framework computes from
// inputs in `format` (PyTorch's math path: autograd through scale Q K^T, the softmax and P V), the yardstick of
// judge_backward's statistical check (docs/error-model.md §10.7). Per row (b, h, i), over its visible keys j, in fp32
// rounded to nearest, every dot product and sum one FMA chain in index order:
//   t_ij = fl(scale fl(q_i.k_j));  with a softcap c: y_ij = fl(tanh(fl(t_ij / c))), s_ij = fl(c y_ij); else s_ij = t_ij;
//   m_i = max(max_j s_ij, sink_h);  e_ij = fl(exp(fl(s_ij - m_i)));  l_i = e_i1 + ... + e_in (+ fl(exp(fl(sink_h - m_i))));
//   P_ij = fl(e_ij / l_i), rounded to `format` (the softmax's output in the dtype);
//   dP_ij = fl(dO_i.v_j), rounded to `format` (a GEMM's output in the dtype);
//   D_i = fl(sum_j P_ij dP_ij) and dS_ij = fl(P_ij fl(dP_ij - D_i)) (the softmax's backward), with a softcap times
//   g_ij = fl(1 - fl(y_ij^2)); rounded to `format`;
//   dQ_i = fl(scale fl(sum_j dS_ij k_j)), rounded to `format`;
//   dK_j = fl(scale fl(sum_i dS_ij q_i)) and dV_j = fl(sum_i P_ij dO_i), each sum one fp32 accumulator over the rows
//   of every query head of the key's group in (b, h, i) order, rounded to `format` once.
// exp and tanh are correctly rounded to fp32 (computed in double). A row without a visible key and no sink, or with a
// sink of +inf, adds nothing (P = 0); a sink of -inf is none. In fp32 the roundings to `format` change nothing: the
// reference is then the plain fp32 computation. Non-finite inputs give whatever fp32 gives (the statistical check
// pools only elements whose exact gradient, bound and reference are finite). dsink is not computed. Under a dropout
// (s32 = fl32(1 / (1 - p)), z the keep decision) as a framework's dropout layer after the softmax: dV_j sums
// fl(P_ij z_ij s32) (in `format`) times dO_i, and dP'_ij = z_ij s32 dP_ij (in `format`) replaces dP_ij in D and dS;
// the noise of dV scales with z s32 and that of dP with it (a dropped dP' is exact). p = 0 is no dropout, bit for bit.
//
// Beside each element, in double, what a FlashAttention-style backward cannot help erring by where this reference
// does not (it recomputes P from the forward's LSE and takes D = dO.O from the forward's O); the statistical check
// holds the kernel's error less the second, to the reference's error or the first, whichever is larger:
struct SamePrecisionGradient {
  std::vector<double> dq, dk, dv;  // shaped like Gradient's
  // The magnitude the element's fp32 roundings scale with, before cancellation: dQ_i (column c) |scale| sum_j
  // P_ij (|dP_ij| + |D_i|) g_ij |k_jc|, dK_j |scale| sum_i P_ij (|dP_ij| + |D_i|) g_ij |q_ic|, dV_j sum_i P_ij |dO_ic|
  // (g = 1 without a softcap). judge_backward's floor is a few fp32 roundings of it.
  std::vector<double> dq_magnitude, dk_magnitude, dv_magnitude;
  // The noise: the RMS effect of independent errors of every P_ij, relative
  //   eps_ij = u_32 (|s_ij| + |LSE_i| + N_ij) + |dL_i| + kExp2RelErr (+ kTanhRelErr |s_ij| with a softcap),
  //   dL_i = LSE_i as given (ForwardResult::lse) - LSE_i of this reference: the forward's error of LSE, which moves
  //   every P a kernel recomputes from it by the factor e^-dL_i (an fp32 forward on split TF32 with q near fp32's
  //   maximum errs there by 6e-4, within its bound),
  //   N_ij = |scale| g_ij sqrt(sum_c (q_i1 k_j1 + ... + q_ic k_jc)^2),  LSE_i = m_i + ln l_i,
  // and of every dP_ij - D_i, absolute
  //   w_ij = u_32 sqrt(sum_c (dO_i1 v_j1 + ... + dO_ic v_jc)^2 + sum_c (dO_i1 O_i1 + ... + dO_ic O_ic)^2)
  //          + 2 dim_v 2^-126
  // (the partial sums of the score, of dP and of a kernel's D = dO.O from the given O, each rounded once; the last
  // term the products of dP and D below fp32's smallest normal, which a kernel that flushes subnormals loses), through
  // dV_j = sum_i P_ij dO_i and dT_ij = P_ij (dP_ij - D_i) g_ij, a score error eps moving P by a factor e^eps (eps
  // below stands for e^eps - 1: equal to first order, and still a bound where scores of 10^8 make eps exceed 1):
  //   dV_j (column c)  sqrt(sum_i (eps_ij P_ij dO_ic)^2),
  //   dQ_i (column c)  |scale| sqrt(sum_j (t_ij k_jc)^2),
  //   t_ij^2 = (eps_ij P_ij (|dP_ij - D_i| + |dD_i|) g_ij)^2 + (w_ij e^eps_ij P_ij g_ij)^2 + (gamma_ij P_ij (dP_ij - D_i))^2,
  //   dD_i = dO_i.O_i - dO_i.O_exact_i (the given O's shift of D: what a kernel's dP - D keeps where this reference's
  //   cancels), e^eps P_ij the largest P a kernel recomputes,
  //   dK_j likewise with q_ic over i;
  // with a softcap, gamma_ij = 2 |y_ij| (kTanhRelErr |y_ij| + g_ij u_32 (2 |a_ij| + N_ij / (g_ij c))) is what the
  // factor g = 1 - y^2 moves by when tanh errs by kTanhRelErr and its argument a_ij = s_ij / c by its roundings: where
  // the cap saturates (g below fp32's spacing under 1), it is the whole of a kernel's dT and no longer small beside it.
  // This reference normalises P by its own m and l, so the weight of a row's largest score is exact whatever that
  // score's rounding, and its D is its own sum_j P_ij dP_ij, so a row of one key (or one dominant key) gets dS = 0
  // exactly. A kernel that recomputes P = exp(s - LSE) subtracts two separately rounded numbers (its score, summed
  // again in another order than the forward's, and the forward's LSE, both of the scores' size) and errs by about eps
  // in every P; one that takes D = dO.O computes dP and D as two dot products rounded apart, and errs by about w in
  // dP - D: on rows of large scores or long dot products, far above this reference's error. A GPU's exp2 and tanhf err
  // by up to kExp2RelErr and 2 ulp where this reference rounds exp and tanh correctly.
  std::vector<double> dq_noise, dk_noise, dv_noise;
  // The given O's effect: a kernel's D_i = dO_i.O_i from the O the forward wrote lies dD_i = dO_i.(O_i - O*_i) from
  // the exact D, and every dS_ij moves by -P_ij g_ij dD_i, so (to first order)
  //   dQ_i (column c)  -scale dD_i sum_j P_ij g_ij k_jc,   dK_j (column c)  -scale sum_i dD_i P_ij g_ij q_ic,
  // with P = e / l unrounded; dV does not read D. The forward's rounding of O is the forward verdict's to judge; where
  // dQ cancels (keys alike, so that sum_j dS_ij = 0 carries it) it is most of the kernel's error, and this reference,
  // whose D is its own sum_j P_ij dP_ij, has none of it.
  std::vector<double> dq_from_o, dk_from_o;
};
// d_o as exact_gradient takes it; forward the forward's O and LSE as the kernel read them (ForwardResult); d_exact the
// exact D per row (Gradient::d, [batch, heads_q, seqlen_q]). A size other than the problem's throws
// std::invalid_argument naming the field.
SamePrecisionGradient same_precision_gradient(const Problem& problem, std::span<const double> d_o,
                                              const ForwardResult& forward, std::span<const double> d_exact,
                                              Format format);

}  // namespace flashcheck::oracle
