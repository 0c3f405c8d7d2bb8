"""A kernel written in Python put under flashcheck: attention row by row in plain Python (double precision, no
framework), forward and backward, on the harness's host buffers (memoryviews), dense or as packed variable-length
sequences. Small on purpose: a template for the calling convention, and the CPU tier's test of the Python bridge
(subjects/tests/python_subject_test.sh, pytest_subject_test.sh).

    attention          healthy: masks none and causal of both alignments, fp32, GQA, every layout (a memoryview
                       indexes fp32 elements in plain Python; fp16's format "e" takes numpy or torch), packed
                       sequences with spare key slots, its backward pass (attention_backward), dropout with the
                       documented mask (docs/design/dropout-rng.md: Philox4x32-10 written out below) and its dump, and
                       f8e4m3 inputs with descales (O rounded to bf16), exact where the fp8 class rounds
    attention_aligned  the same with a planted bug: causal bottom-right computed as top-left, the alignment mix-up
                       that shows only where seqlen_q != seqlen_k

Run the suite on it (with this folder on PYTHONPATH):

    flashcheck-repro --subject python:naive_attention:attention "f32 b=1 hq=2 hkv=1 sq=5 sk=9 d=8 mask=causal-br \
q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=1"
    FLASHCHECK_SUBJECT=python:naive_attention:attention properties_model
"""
import math
import struct

import flashcheck_subject as fc


def declaration(backward_function):
    return dict(memory="host", dtypes=["f32"], head_dim=[1, 16], masks=["none", "causal-br", "causal-tl"],
                layouts=["bhsd", "bshd", "strided"], gqa=True, lse=True, arithmetic={"f32": "general-fp32"},
                limits={"seqlen_q_max": 40, "seqlen_k_max": 48},
                sequences={"features": ["varlen", "seqused_k"]},
                backward={"function": backward_function, "arithmetic": {"f32": "general-fp32"}, "sequences": True,
                          "deterministic": True},
                dropout={"arithmetic": {"f32": "general-fp32"}, "mask_dump": True, "sequences": True, "backward": True},
                # Tiles of 16 keys up to head dim 8 and 24 above: two fit seqlen_k_max, so the fp8 properties of rows
                # over several tiles run here, and the bridge's per-head-dim table is exercised; fp8 head dims 4, 8,
                # 12 and 16 (the fp8 path's own head dims: its refusals would be discards).
                fp8={"arithmetic": "tensor-core-fp8", "descales": True, "key_tile": 24, "key_tiles": {8: 16},
                     "head_dim_multiple": 4})


def e4m3(byte):
    """An OCP e4m3 (E4M3FN) byte's value: bias 7, subnormals below 2^-6, no infinities, S.1111.111 NaN."""
    sign = -1.0 if byte & 0x80 else 1.0
    exponent, fraction = (byte >> 3) & 0xF, byte & 7
    if exponent == 15 and fraction == 7:
        return math.nan
    if exponent == 0:
        return sign * fraction * 2.0 ** -9
    return sign * (1 + fraction / 8) * 2.0 ** (exponent - 7)


def bf16_bits(x):
    """x rounded to bf16 (to nearest, ties to even, straight from double: no fp32 step to round twice), its bits."""
    if x != x:
        return 0x7FC0
    sign = 0x8000 if math.copysign(1.0, x) < 0 else 0
    a = abs(x)
    if a == 0.0 or a == math.inf:
        return sign | (0x7F80 if a else 0)
    exponent = max(math.frexp(a)[1], -125)  # a in [2^(e-1), 2^e); below 2^-126 the subnormals' fixed step
    step = 2.0 ** (exponent - 8)            # 8 significant bits
    value = round(a / step) * step          # a / step is exact; round() ties to even
    if value >= 2.0 ** 128 * (1 - 2.0 ** -9):  # past the largest bf16 by half its step or more
        return sign | 0x7F80
    return sign | (struct.unpack("<I", struct.pack("<f", value))[0] >> 16)


def reader(problem, buffers, name):
    """(b, kv head, index) -> the value of Q's, K's or V's element: fp32 as stored, or for f8e4m3 the e4m3 byte's value
    times the tensor's descale for (b, kv head)."""
    view = buffers[name]
    if problem["dtype"] != "f8e4m3":
        return lambda b, g, index: view[index]
    descale = buffers.get("descale_" + name)
    return lambda b, g, index: e4m3(view[index]) * (1.0 if descale is None else descale[b, g])


def writer(problem, view):
    """(index, x) -> O's element set to x: fp32, or for f8e4m3 bf16's bits."""
    encode = bf16_bits if problem["dtype"] == "f8e4m3" else (lambda x: x)

    def put(index, x):
        view[index] = encode(x)
    return put


M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
WORD = 0xFFFFFFFF


def philox4x32_10(counter, key):
    """Philox4x32-10's four 32-bit words for a counter of four words under a key of two."""
    x0, x1, x2, x3 = counter
    k0, k1 = key
    for _ in range(10):
        p0, p1 = M0 * x0, M1 * x2
        x0, x1, x2, x3 = ((p1 >> 32) ^ x1 ^ k0) & WORD, p1 & WORD, ((p0 >> 32) ^ x3 ^ k1) & WORD, p0 & WORD
        k0, k1 = (k0 + W0) & WORD, (k1 + W1) & WORD
    return x0, x1, x2, x3


class Dropout:
    """The problem's dropout: element (b, h, i, j) is kept iff word j mod 4 of Philox4x32-10 at counter (j div 4, i,
    lo32(s), hi32(s)), s = offset + b * heads_q + h mod 2^64, under key (lo32(seed), hi32(seed)) is at least
    floor(p * 2^32); a kept weight is scaled by 1 / (1 - p). p = 0: every element kept, scale 1."""

    def __init__(self, problem):
        self.p = problem.get("dropout_p", 0.0)
        seed, self.offset = problem.get("dropout_seed", 0), problem.get("dropout_offset", 0)
        self.key = (seed & WORD, seed >> 32)
        self.threshold = int(self.p * 2.0 ** 32)  # exact: p * 2^32 only moves p's exponent
        self.scale = 1.0 / (1.0 - self.p)
        self.heads_q = problem["heads_q"]

    def kept(self, b, h, i, j):
        if self.p == 0.0:
            return True
        s = (self.offset + b * self.heads_q + h) % 2 ** 64
        return philox4x32_10((j // 4, i, s & WORD, s >> 32), self.key)[j % 4] >= self.threshold

    def weight(self, b, h, i, j):  # z_ij / (1 - p)
        return self.scale if self.kept(b, h, i, j) else 0.0


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
    q, k = reader(problem, buffers, "q"), reader(problem, buffers, "k")
    g = h // (problem["heads_q"] // problem["heads_kv"])
    sq, sk = at.lengths(b)
    d, scale = problem["head_dim"], problem["softmax_scale"]
    qi = at.row(buffers["q"], b, h, i)
    return [(j, scale * sum(q(b, g, qi + (c,)) * k(b, g, at.key(b, g, j) + (c,)) for c in range(d)))
            for j in range(sk) if visible(mask, i, j, sq, sk)]


def dump_mask(problem, buffers, at, drop, mask):
    """The mask dump: 1 where an element exists, is visible and is kept, 0 at every other byte."""
    dump = buffers.get("dropout_mask")
    if dump is None:
        return
    for b in range(problem["batch"]):
        sq, sk = at.lengths(b)
        for h in range(problem["heads_q"]):
            for i in range(problem["seqlen_q"]):
                for j in range(problem["seqlen_k"]):
                    exists = i < sq and j < sk and visible(mask, i, j, sq, sk)
                    dump[b, h, i, j] = 1 if exists and drop.kept(b, h, i, j) else 0


def run(problem, buffers, mask_of):
    v, o, lse = reader(problem, buffers, "v"), buffers["o"], buffers["lse"]
    put = writer(problem, o)
    at = Layout(problem, buffers)
    dv, mask = problem["head_dim_v"], mask_of(problem["mask"])
    group = problem["heads_q"] // problem["heads_kv"]
    drop = Dropout(problem)
    dump_mask(problem, buffers, at, drop, mask)
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
                        put(oi + (c,), 0.0)
                    lse[at.lse(b, h, i)] = -math.inf
                    continue
                weights = [(j, math.exp(s - m)) for j, s in scores]
                total = sum(w for _, w in weights)  # the undropped softmax's denominator (and LSE)
                # A dropped key's V row is not read; a kept one's is, whatever its weight (0 * NaN is NaN).
                kept = [(j, w * drop.weight(b, h, i, j)) for j, w in weights if drop.kept(b, h, i, j)]
                g = h // group
                for c in range(dv):
                    put(oi + (c,), sum(w * v(b, g, at.key(b, g, j) + (c,)) for j, w in kept) / total)
                lse[at.lse(b, h, i)] = m + math.log(total)


def run_backward(problem, buffers, mask_of):
    """dV_j = sum_i P_ij dO_i, dS_ij = P_ij (dO_i.v_j - dO_i.O_i), dQ_i = scale sum_j dS_ij k_j, dK_j = scale sum_i
    dS_ij q_i, with P_ij = exp(s_ij - LSE_i) from the forward's LSE and D_i from its O (flashcheck/backward.h); under a
    dropout z_ij / (1 - p) weighs P_ij in dV and dO_i.v_j in dS (docs/design/dropout-rng.md)."""
    q, k, v, o, lse, d_o = (buffers[n] for n in ("q", "k", "v", "o", "lse", "d_o"))
    dq, dk, dv_out = buffers["dq"], buffers["dk"], buffers["dv"]
    at = Layout(problem, buffers)
    d, dv, scale, mask = problem["head_dim"], problem["head_dim_v"], problem["softmax_scale"], mask_of(problem["mask"])
    group = problem["heads_q"] // problem["heads_kv"]
    drop = Dropout(problem)
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
                    z = drop.weight(b, h, i, j)
                    dp = z * sum(d_o[oi + (c,)] * v[kj + (c,)] for c in range(dv)) if z != 0.0 else 0.0
                    ds = p * (dp - d_i)
                    gv = grad_v.setdefault((g, j), [0.0] * dv)
                    gk = grad_k.setdefault((g, j), [0.0] * d)
                    for c in range(dv):
                        gv[c] += p * z * d_o[oi + (c,)]
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
