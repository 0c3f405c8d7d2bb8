"""A kernel written in Python put under flashcheck: attention row by row in plain Python (double precision, no
framework), forward and backward, on the harness's host buffers (memoryviews), dense or as packed variable-length
sequences. Small on purpose: a template for the calling convention, and the CPU tier's test of the Python bridge
(subjects/tests/python_subject_test.sh, pytest_subject_test.sh).

    attention          healthy: masks none and causal of both alignments, fp32, GQA, every layout (a memoryview
                       indexes fp32 elements in plain Python; fp16's format "e" takes numpy or torch), packed
                       sequences with spare key slots, and its backward pass (attention_backward)
    attention_aligned  the same with a planted bug: causal bottom-right computed as top-left, the alignment mix-up
                       that shows only where seqlen_q != seqlen_k

Run the suite on it (with this folder on PYTHONPATH):

    flashcheck-repro --subject python:naive_attention:attention "f32 b=1 hq=2 hkv=1 sq=5 sk=9 d=8 mask=causal-br \
q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=1"
    FLASHCHECK_SUBJECT=python:naive_attention:attention properties_model
"""
import math

import flashcheck_subject as fc


def declaration(backward_function):
    return dict(memory="host", dtypes=["f32"], head_dim=[1, 16], masks=["none", "causal-br", "causal-tl"],
                layouts=["bhsd", "bshd", "strided"], gqa=True, lse=True, arithmetic={"f32": "general-fp32"},
                limits={"seqlen_q_max": 40, "seqlen_k_max": 48},
                sequences={"features": ["varlen", "seqused_k"]},
                backward={"function": backward_function, "arithmetic": {"f32": "general-fp32"}, "sequences": True,
                          "deterministic": True})


def visible(mask, i, j, seqlen_q, seqlen_k):
    if mask == "causal-br":
        return j <= i + (seqlen_k - seqlen_q)
    if mask == "causal-tl":
        return j <= i
    return True


class Layout:
    """Where sequence b's rows and keys are: the dense [B, H, S, D] views, or packed ones (cu_seqlens, seqused_k)."""

    def __init__(self, problem, buffers):
        self.cu_q, self.cu_k, self.used = buffers.get("cu_seqlens_q"), buffers.get("cu_seqlens_k"), buffers.get("seqused_k")
        self.problem = problem

    def lengths(self, b):
        if self.cu_q is None:
            return self.problem["seqlen_q"], self.problem["seqlen_k"]
        keys = self.used[b] if self.used is not None else self.cu_k[b + 1] - self.cu_k[b]
        return self.cu_q[b + 1] - self.cu_q[b], keys

    def slots(self, b):  # key slots in memory: the keys and the spare ones past them
        return self.problem["seqlen_k"] if self.cu_k is None else self.cu_k[b + 1] - self.cu_k[b]

    def row(self, view, b, h, i):  # (view, index prefix) of row i of head h: view[prefix + (c,)]
        return (b, h, i) if self.cu_q is None else (self.cu_q[b] + i, h)

    def key(self, b, g, j):
        return (b, g, j) if self.cu_k is None else (self.cu_k[b] + j, g)

    def lse(self, b, h, i):
        return (b, h, i) if self.cu_q is None else (h, self.cu_q[b] + i)


def scores_of(problem, buffers, at, b, h, i, mask):
    q, k = buffers["q"], buffers["k"]
    g = h // (problem["heads_q"] // problem["heads_kv"])
    sq, sk = at.lengths(b)
    d, scale = problem["head_dim"], problem["softmax_scale"]
    qi = at.row(q, b, h, i)
    return [(j, scale * sum(q[qi + (c,)] * k[at.key(b, g, j) + (c,)] for c in range(d)))
            for j in range(sk) if visible(mask, i, j, sq, sk)]


def run(problem, buffers, mask_of):
    v, o, lse = buffers["v"], buffers["o"], buffers["lse"]
    at = Layout(problem, buffers)
    dv, mask = problem["head_dim_v"], mask_of(problem["mask"])
    group = problem["heads_q"] // problem["heads_kv"]
    for b in range(problem["batch"]):
        for h in range(problem["heads_q"]):
            for i in range(at.lengths(b)[0]):
                scores = scores_of(problem, buffers, at, b, h, i, mask)
                oi = at.row(o, b, h, i)
                m = max((s for _, s in scores), default=-math.inf)
                if any(s != s for _, s in scores):  # a NaN score propagates, wherever max() met it
                    m = math.nan
                if m == -math.inf:  # no visible key, or every visible score -inf: O = 0, LSE = -inf (not exp(-inf + inf))
                    for c in range(dv):
                        o[oi + (c,)] = 0.0
                    lse[at.lse(b, h, i)] = -math.inf
                    continue
                weights = [(j, math.exp(s - m)) for j, s in scores]
                total = sum(w for _, w in weights)
                g = h // group
                for c in range(dv):
                    o[oi + (c,)] = sum(w * v[at.key(b, g, j) + (c,)] for j, w in weights) / total
                lse[at.lse(b, h, i)] = m + math.log(total)


def run_backward(problem, buffers, mask_of):
    """dV_j = sum_i P_ij dO_i, dS_ij = P_ij (dO_i.v_j - dO_i.O_i), dQ_i = scale sum_j dS_ij k_j, dK_j = scale sum_i
    dS_ij q_i, with P_ij = exp(s_ij - LSE_i) from the forward's LSE and D_i from its O (flashcheck/backward.h)."""
    q, k, v, o, lse, d_o = (buffers[n] for n in ("q", "k", "v", "o", "lse", "d_o"))
    dq, dk, dv_out = buffers["dq"], buffers["dk"], buffers["dv"]
    at = Layout(problem, buffers)
    d, dv, scale, mask = problem["head_dim"], problem["head_dim_v"], problem["softmax_scale"], mask_of(problem["mask"])
    group = problem["heads_q"] // problem["heads_kv"]
    for b in range(problem["batch"]):
        sq, sk = at.lengths(b)
        grad_k = {}
        grad_v = {}
        for h in range(problem["heads_q"]):
            g = h // group
            for i in range(sq):
                qi, oi = at.row(q, b, h, i), at.row(o, b, h, i)
                row_lse = lse[at.lse(b, h, i)]
                scores = [] if row_lse == -math.inf else scores_of(problem, buffers, at, b, h, i, mask)
                d_i = sum(d_o[oi + (c,)] * o[oi + (c,)] for c in range(dv))
                grad_q = [0.0] * d
                for j, s in scores:
                    p = math.exp(s - row_lse)
                    kj = at.key(b, g, j)
                    dp = sum(d_o[oi + (c,)] * v[kj + (c,)] for c in range(dv))
                    ds = p * (dp - d_i)
                    gv = grad_v.setdefault((g, j), [0.0] * dv)
                    gk = grad_k.setdefault((g, j), [0.0] * d)
                    for c in range(dv):
                        gv[c] += p * d_o[oi + (c,)]
                    for c in range(d):
                        grad_q[c] += scale * ds * k[kj + (c,)]
                        gk[c] += scale * ds * q[qi + (c,)]
                for c in range(d):
                    dq[qi + (c,)] = grad_q[c]
        for g in range(problem["heads_kv"]):
            for j in range(at.slots(b)):  # every key slot: those no row sees, and the spare ones, get 0
                kj = at.key(b, g, j)
                for c in range(d):
                    dk[kj + (c,)] = grad_k.get((g, j), [0.0] * d)[c]
                for c in range(dv):
                    dv_out[kj + (c,)] = grad_v.get((g, j), [0.0] * dv)[c]


def healthy(mask):
    return mask


def mixed_up(mask):
    return "causal-tl" if mask == "causal-br" else mask


@fc.subject(name="python-naive", **declaration("attention_backward"))
def attention(problem, buffers):
    run(problem, buffers, healthy)


def attention_backward(problem, buffers):
    run_backward(problem, buffers, healthy)


@fc.subject(name="python-naive-aligned", **declaration("attention_aligned_backward"))
def attention_aligned(problem, buffers):
    run(problem, buffers, mixed_up)


def attention_aligned_backward(problem, buffers):
    run_backward(problem, buffers, mixed_up)
