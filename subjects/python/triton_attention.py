"""A FlashAttention forward kernel written in Triton, put under flashcheck as a Python subject: the example of what a
team writing its kernels in Python runs the suite on (the CUDA example in subjects/example/ is its twin).

One program per (BLOCK_M query rows, batch x query head): the online softmax over BLOCK_N-key tiles in exp2, scores in
fp32 from the dtype's inputs, P rounded to the dtype before P.V, fp32 accumulation (the tensor-core class of
docs/error-model.md for fp16/bf16; fp32 runs its products in IEEE fp32, the general-fp32 class). Every mask of the
semantics (causal and windows in both alignments), softcap, sinks, GQA, head_dim 1..256, any strides; LSE written.
fp32 also takes a dropout with the documented mask (docs/design/dropout-rng.md: Philox4x32-10, triton.language's
tl.philox, at counter (key // 4, row, stream) under the seed, word key % 4) and dumps it.
Flashcheck's semantics for special values are kept: a row without a visible key gives O = 0 and LSE = -inf (the
sink), values of hidden keys never reach O (the products with V run on V's finite part, and a visible non-finite V
value is put back into the columns it reaches), NaN scores propagate.

    attention          healthy
    attention_tail     the planted bug: the last key tile's loads past seqlen_k return 0 and the key-range mask is
                       left out, so the padding keys join the softmax with score 0 (and V = 0): O shrinks towards 0 and
                       LSE grows wherever seqlen_k is not a multiple of BLOCK_N. The tutorial kernels' classic slip.

Run the suite on it on a GPU machine with Triton (this folder on PYTHONPATH):

    flashcheck-report --subject python:triton_attention:attention
    flashcheck-repro --subject python:triton_attention:attention_tail "<case line>"
    FLASHCHECK_SUBJECT=python:triton_attention:attention properties_gpu
"""
import flashcheck_subject as fc

BLOCK_M, BLOCK_N = 64, 64

try:
    import torch
    import triton
    import triton.language as tl
    from triton.language.extra import libdevice
except ImportError:  # the declarations below still load, so the tools can name what is missing
    triton = None

if triton is not None:
    LOG2E = tl.constexpr(1.4426950408889634)  # a jit function reads only constexpr globals

    # One compile per dtype and constexpr set, whatever the shape: no integer argument is specialised (Triton would
    # compile again for every value of 1 or multiple of 16 it meets), no pointer on its alignment; the sink and the
    # softcap are runtime values (a sink of -inf and a softcap of 0 are none), so that they add no compiles either.
    @triton.jit(do_not_specialize=["sqb", "sqh", "sqs", "skb", "skh", "sks", "svb", "svh", "svs", "sob", "soh", "sos",
                                   "slb", "slh", "sls", "heads_q", "group", "seqlen_q", "seqlen_k", "head_dim",
                                   "lo_off", "hi_off", "threshold", "seed_lo", "seed_hi", "offset_lo", "offset_hi",
                                   "has_sink"],
                do_not_specialize_on_alignment=["Q", "K", "V", "O", "LSE", "SINK", "MASK"])
    def _forward(Q, K, V, O, LSE, SINK,
                 sqb, sqh, sqs, skb, skh, sks, svb, svh, svs, sob, soh, sos, slb, slh, sls,
                 heads_q, group, seqlen_q, seqlen_k, head_dim, scale, softcap, lo_off, hi_off,
                 MASK, threshold, seed_lo, seed_hi, offset_lo, offset_hi, keep_scale, has_sink,
                 IEEE: tl.constexpr, TAIL_BUG: tl.constexpr,
                 DROPOUT: tl.constexpr, DUMP: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
        start_m = tl.program_id(0)
        bh = tl.program_id(1)
        b = bh // heads_q
        h = bh % heads_q
        g = h // group
        rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tl.arange(0, BLOCK_D)
        row_ok = rows < seqlen_q
        col_ok = cols < head_dim
        q = tl.load(Q + b.to(tl.int64) * sqb + h.to(tl.int64) * sqh + rows[:, None].to(tl.int64) * sqs + cols[None, :],
                    mask=row_ok[:, None] & col_ok[None, :], other=0.0)
        # Row i sees keys lo_off + i .. hi_off + i (the mask's aligned window; +-seqlen_k-wide where unbounded).
        first = lo_off + start_m * BLOCK_M
        if first < 0:
            first = 0
        last = hi_off + start_m * BLOCK_M + BLOCK_M - 1
        if last > seqlen_k - 1:
            last = seqlen_k - 1
        start_n0 = (first // BLOCK_N) * BLOCK_N
        m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
        pos_hits = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)  # visible keys whose V is +inf, -inf, NaN, per column
        neg_hits = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
        nan_hits = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
        if DROPOUT:  # this (b, h)'s Philox stream: offset + b * heads_q + h modulo 2^64, and the key
            stream = ((offset_hi.to(tl.uint32, bitcast=True).to(tl.uint64) << 32) |
                      offset_lo.to(tl.uint32, bitcast=True).to(tl.uint64)) + bh.to(tl.uint64)
            c2 = tl.full([BLOCK_M, BLOCK_N], 0, tl.uint32) + (stream & 0xFFFFFFFF).to(tl.uint32)
            c3 = tl.full([BLOCK_M, BLOCK_N], 0, tl.uint32) + (stream >> 32).to(tl.uint32)
            key = (seed_hi.to(tl.uint32, bitcast=True).to(tl.uint64) << 32) | \
                seed_lo.to(tl.uint32, bitcast=True).to(tl.uint64)
            t = threshold.to(tl.uint32, bitcast=True)
        for start_n in range(start_n0, last + 1, BLOCK_N):
            keys = start_n + tl.arange(0, BLOCK_N)
            key_ok = keys < seqlen_k
            k_ptr = K + b.to(tl.int64) * skb + g.to(tl.int64) * skh + keys[:, None].to(tl.int64) * sks + cols[None, :]
            v_ptr = V + b.to(tl.int64) * svb + g.to(tl.int64) * svh + keys[:, None].to(tl.int64) * svs + cols[None, :]
            k = tl.load(k_ptr, mask=key_ok[:, None] & col_ok[None, :], other=0.0)
            v = tl.load(v_ptr, mask=key_ok[:, None] & col_ok[None, :], other=0.0)
            if IEEE:
                s = tl.dot(q, tl.trans(k), input_precision="ieee")
            else:
                s = tl.dot(q, tl.trans(k))
            s = s * scale
            s = tl.where(softcap > 0, softcap * libdevice.tanh(s / softcap), s)
            delta = keys[None, :] - rows[:, None]
            visible = (delta >= lo_off) & (delta <= hi_off)
            if not TAIL_BUG:
                visible = visible & key_ok[None, :]
            s = tl.where(visible, s * LOG2E, -float("inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1), propagate_nan=tl.PropagateNan.ALL)
            m_new = tl.where(tl.max((s != s).to(tl.int32), 1) > 0, float("nan"), m_new)  # tl.max drops NaN
            m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
            alpha = tl.exp2(m_i - m_safe)
            p = tl.exp2(s - m_safe[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)  # the undropped softmax's sum: LSE is undropped
            if DROPOUT:
                c0 = (tl.zeros([BLOCK_M, BLOCK_N], tl.int32) + (keys // 4)[None, :]).to(tl.uint32)
                c1 = (tl.zeros([BLOCK_M, BLOCK_N], tl.int32) + rows[:, None]).to(tl.uint32)
                r0, r1, r2, r3 = tl.philox(key, c0, c1, c2, c3, 10)
                word = (keys % 4)[None, :]
                r = tl.where(word == 0, r0, tl.where(word == 1, r1, tl.where(word == 2, r2, r3)))
                kept = r >= t
                p = tl.where(kept, p * keep_scale, 0.0)
                visible = visible & kept  # a dropped key's V reaches nothing
                if DUMP:
                    m_ptr = MASK + bh.to(tl.int64) * seqlen_q * seqlen_k + rows[:, None].to(tl.int64) * seqlen_k + \
                        keys[None, :]
                    tl.store(m_ptr, visible.to(tl.uint8), mask=row_ok[:, None] & key_ok[None, :])
            finite = (v == v) & (tl.abs(v.to(tl.float32)) != float("inf"))
            v_finite = tl.where(finite, v, 0.0)
            if IEEE:
                acc = acc * alpha[:, None] + tl.dot(p, v_finite, input_precision="ieee")
            else:
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v_finite)
            if tl.max((~finite).to(tl.int32)) > 0:  # the keys of weight > 0 whose V value is not finite, counted
                seen = (visible & (s != -float("inf"))).to(tl.float16)
                pos_hits += tl.dot(seen, (v.to(tl.float32) == float("inf")).to(tl.float16))
                neg_hits += tl.dot(seen, (v.to(tl.float32) == -float("inf")).to(tl.float16))
                nan_hits += tl.dot(seen, (v != v).to(tl.float16))
            m_i = m_new
        sink = tl.where(has_sink != 0, tl.load(SINK + h), -float("inf")) * LOG2E  # -inf: no sink, weight 0
        m_all = tl.maximum(m_i, sink, propagate_nan=tl.PropagateNan.ALL)
        m_all_safe = tl.where(m_all == -float("inf"), 0.0, m_all)
        sink_weight = tl.exp2(sink - m_all_safe)
        l_all = l_i * tl.exp2(m_i - m_all_safe) + sink_weight
        o = acc * (tl.exp2(m_i - m_all_safe) / tl.where(l_all > 0, l_all, 1.0))[:, None]
        o = tl.where((pos_hits > 0) & (o == o), float("inf"), o)
        o = tl.where((neg_hits > 0) & (o == o), tl.where(o == float("inf"), float("nan"), -float("inf")), o)
        o = tl.where(nan_hits > 0, float("nan"), o)
        lse = tl.where(m_all == -float("inf"), -float("inf"), (m_all + tl.log2(l_all)) / LOG2E)
        # A sink of +inf takes all the weight: O = 0 (NaN where the accumulator is not finite).
        acc_bad = (acc != acc) | (pos_hits + neg_hits + nan_hits > 0)
        o = tl.where(sink == float("inf"), tl.where(acc_bad, float("nan"), 0.0), o)
        lse = tl.where(sink == float("inf"), float("inf"), lse)
        tl.store(O + b.to(tl.int64) * sob + h.to(tl.int64) * soh + rows[:, None].to(tl.int64) * sos + cols[None, :],
                 o.to(O.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])
        tl.store(LSE + b.to(tl.int64) * slb + h.to(tl.int64) * slh + rows.to(tl.int64) * sls, lse, mask=row_ok)


def as_int32(word):
    """A 32-bit word as the int32 of the same bits: every launch passes the dropout's words as i32 (a value past
    2^31 would make Triton type it i64, and compile again); the kernel reads them back as uint32."""
    return word - (1 << 32) if word >= 1 << 31 else word


def block_d(head_dim):
    """The head-dim block: the next power of two, at least 16 (tl.dot's smallest)."""
    return max(16, 1 << (head_dim - 1).bit_length())


def num_stages(element_bytes, head_block):
    """The software pipeline's depth: each stage holds a K and a V tile, 2 * BLOCK_N * BLOCK_D * element_bytes of
    shared memory. Triton's default of 3 stages fits Hopper's 227 KiB per block up to 64 KiB a stage (fp32 at
    BLOCK_D 128, fp16 and bf16 at 256); fp32 at BLOCK_D 256 (128 KiB a stage) runs one."""
    return 3 if 2 * BLOCK_N * head_block * element_bytes <= 64 * 1024 else 1


def launch(problem, q, k, v, o, lse, sink, dump, tail_bug):
    """The kernel on torch tensors, on torch's current stream. K and V are None where seqlen_k is 0 (the bridge has no
    buffer of no bytes): no key tile is visited then, and Q stands in for their pointers and strides."""
    if k is None or v is None:
        k = v = q
    if any(t.stride(-1) != 1 for t in (q, k, v, o)):
        raise NotImplementedError("strides: the Triton example reads rows with unit column stride")
    lo, hi = fc.key_window(problem)
    d = block_d(problem["head_dim"])
    p_drop, seed, offset = problem["dropout_p"], problem["dropout_seed"], problem["dropout_offset"]
    grid = (triton.cdiv(problem["seqlen_q"], BLOCK_M), problem["batch"] * problem["heads_q"])
    _forward[grid](q, k, v, o, lse, sink if sink is not None else lse,
                   *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3], *lse.stride(),
                   problem["heads_q"], problem["heads_q"] // problem["heads_kv"], problem["seqlen_q"],
                   problem["seqlen_k"], problem["head_dim"], problem["softmax_scale"], problem["softcap"], lo, hi,
                   dump if dump is not None else lse,
                   *(as_int32(word) for word in (int(p_drop * 2.0 ** 32), seed & 0xFFFFFFFF, seed >> 32,
                                                 offset & 0xFFFFFFFF, offset >> 32)), 1.0 / (1.0 - p_drop),
                   int(sink is not None), IEEE=problem["dtype"] == "f32",
                   TAIL_BUG=tail_bug, DROPOUT=p_drop > 0, DUMP=dump is not None, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                   BLOCK_D=d, num_stages=num_stages(q.element_size(), d))


def run(problem, buffers, tail_bug):
    if problem["batch"] == 0 or problem["heads_q"] == 0 or problem["seqlen_q"] == 0:
        return
    q, k, v, o, lse, sink, dump = (fc.as_torch(buffers[n]) for n in ("q", "k", "v", "o", "lse", "sink", "dropout_mask"))
    with fc.on_stream(problem):
        if dump is not None:
            dump.zero_()  # the bytes of tiles the kernel skips (hidden keys) are 0; it writes the others
        launch(problem, q, k, v, o, lse, sink, dump, tail_bug)


DECLARATION = dict(memory="device", dtypes=["f32", "f16", "bf16"], head_dim=[1, 256],
                   masks=["none", "causal-br", "causal-tl", "window-br", "window-tl"],
                   layouts=["bhsd", "bshd", "strided"],
                   gqa=True, lse=True, softcap=True, sink=True, key_tile=BLOCK_N,
                   arithmetic={"f32": "general-fp32", "f16": "tensor-core", "bf16": "tensor-core"},
                   dropout={"arithmetic": {"f32": "general-fp32"}, "mask_dump": True})


def require_triton():
    if triton is None:
        raise NotImplementedError("triton: not importable here (the Triton example runs where Triton and a GPU are)")


@fc.subject(name="triton-example", **DECLARATION)
def attention(problem, buffers):
    require_triton()
    run(problem, buffers, tail_bug=False)


@fc.subject(name="triton-example-tail", **DECLARATION)
def attention_tail(problem, buffers):
    require_triton()
    run(problem, buffers, tail_bug=True)
