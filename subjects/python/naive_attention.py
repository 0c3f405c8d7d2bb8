"""A kernel written in Python put under flashcheck: attention row by row in plain Python (double precision, no
framework), on the harness's host buffers (memoryviews). Small on purpose: a template for the calling convention,
and the CPU tier's test of the Python bridge (subjects/tests/python_subject_test.sh).

    attention          healthy: masks none and causal of both alignments, fp32, GQA, every layout (a memoryview
                       indexes fp32 elements in plain Python; fp16's format "e" takes numpy or torch)
    attention_aligned  the same with a planted bug: causal bottom-right computed as top-left, the alignment mix-up
                       that shows only where seqlen_q != seqlen_k

Run the suite on it (from this folder, or with it on PYTHONPATH):

    flashcheck-repro --subject python:naive_attention:attention "f32 b=1 hq=2 hkv=1 sq=5 sk=9 d=8 mask=causal-br \
q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=1"
    FLASHCHECK_SUBJECT=python:naive_attention:attention properties_model
"""
import math

import flashcheck_subject as fc

DECLARATION = dict(memory="host", dtypes=["f32"], head_dim=[1, 16], masks=["none", "causal-br", "causal-tl"],
                   layouts=["bhsd", "bshd", "strided"], gqa=True, lse=True, arithmetic={"f32": "general-fp32"},
                   limits={"seqlen_q_max": 40, "seqlen_k_max": 48})


def visible(mask, i, j, seqlen_q, seqlen_k):
    if mask == "causal-br":
        return j <= i + (seqlen_k - seqlen_q)
    if mask == "causal-tl":
        return j <= i
    return True


def run(problem, buffers, mask_of):
    q, k, v, o, lse = (buffers[name] for name in ("q", "k", "v", "o", "lse"))
    sq, sk, d, dv = problem["seqlen_q"], problem["seqlen_k"], problem["head_dim"], problem["head_dim_v"]
    group = problem["heads_q"] // problem["heads_kv"]
    scale = problem["softmax_scale"]
    mask = mask_of(problem["mask"])
    for b in range(problem["batch"]):
        for h in range(problem["heads_q"]):
            g = h // group
            for i in range(sq):
                scores = []
                for j in range(sk):
                    if visible(mask, i, j, sq, sk):
                        scores.append((j, scale * sum(q[b, h, i, c] * k[b, g, j, c] for c in range(d))))
                m = max((s for _, s in scores), default=-math.inf)
                if any(s != s for _, s in scores):  # a NaN score propagates, wherever max() met it
                    m = math.nan
                if m == -math.inf:  # no visible key, or every visible score -inf: O = 0, LSE = -inf (not exp(-inf + inf))
                    for c in range(dv):
                        o[b, h, i, c] = 0.0
                    lse[b, h, i] = -math.inf
                    continue
                weights = [(j, math.exp(s - m)) for j, s in scores]
                total = sum(w for _, w in weights)
                for c in range(dv):
                    o[b, h, i, c] = sum(w * v[b, g, j, c] for j, w in weights) / total
                lse[b, h, i] = m + math.log(total)


@fc.subject(name="python-naive", **DECLARATION)
def attention(problem, buffers):
    run(problem, buffers, lambda mask: mask)


@fc.subject(name="python-naive-aligned", **DECLARATION)
def attention_aligned(problem, buffers):
    run(problem, buffers, lambda mask: "causal-tl" if mask == "causal-br" else mask)
