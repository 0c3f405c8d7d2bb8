"""PyTorch's FlexAttention (torch.nn.attention.flex_attention, compiled: the fused Triton kernels) as a peer subject,
forward and backward, with flashcheck's masks, softcap and sink written the way its users write them: a mask_mod for
visibility, a score_mod for the softcap, and the sink as one more key column whose score the score_mod sets to the
head's sink logit and whose value row is zero (so it joins the denominator and LSE and adds nothing to O).

Shapes reach the compiled kernels folded: the query heads of one K/V head become rows of one sequence ([B * Hkv, 1,
G * Sq, D]; the mask_mod reads the query's own row as q_idx mod Sq), so a case's head counts and lengths are dynamic
dimensions and one compile serves every case of a dtype and head_dim (flex_attention marks heads and head_dim
static). The folding moves data only (a reshape; a copy where the layout has no such view) and is exact; every score,
softmax and product is FlexAttention's. The mask's parameters are tensors the mods capture, not constants, for the
same reason. The backward pass is autograd through the same call (FlexAttention's fused backward kernel): dQ, dK, dV
on dO. The sink's gradient is not taken (grad=1 cases with a sink are UNSUPPORTED).

    FLASHCHECK_SUBJECT=python:flex_attention:attention properties_gpu
    flashcheck-report --subject python:flex_attention:attention
"""
import flashcheck_subject as fc

try:
    import torch
    from torch.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention
except ImportError:
    torch = None

_compiled = {}


def compiled_flex():
    if "flex" not in _compiled:
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 256)
        _compiled["flex"] = torch.compile(flex_attention, dynamic=True, fullgraph=True)
    return _compiled["flex"]


class Folded:
    """The case folded for flex: q [B*Hkv, 1, G*Sq, D], k and v [B*Hkv, 1, Sk + 1, D] (the sink's column), the mods."""

    def __init__(self, problem, q, k, v, sink):
        batch, heads_q, heads_kv = problem["batch"], problem["heads_q"], problem["heads_kv"]
        sq, sk, d = problem["seqlen_q"], problem["seqlen_k"], problem["head_dim"]
        group = heads_q // heads_kv
        device = q.device
        self.shape = (batch, heads_q, sq)
        # Fresh tensors (a copy where the layout has no such view): a view of the harness's buffer would make the
        # compiled call guard on its base's shape, and recompile per case.
        self.q = q.reshape(batch * heads_kv, 1, group * sq, d).clone(memory_format=torch.contiguous_format)
        # One more key for the sink (score = the head's sink, set by the score_mod; value row 0), always there and
        # hidden by the mask_mod where the case has no sink, so that one compiled kernel serves both.
        self.k = torch.cat([k.reshape(batch * heads_kv, 1, sk, d), k.new_zeros(batch * heads_kv, 1, 1, d)], dim=2)
        self.v = torch.cat([v.reshape(batch * heads_kv, 1, sk, v.shape[-1]),
                            v.new_zeros(batch * heads_kv, 1, 1, v.shape[-1])], dim=2)
        lo, hi = fc.key_window(problem)
        as_tensor = lambda x, dtype=torch.int64: torch.tensor(x, dtype=dtype, device=device)  # noqa: E731
        sq_t, sk_t, lo_t, hi_t = as_tensor(sq), as_tensor(sk), as_tensor(lo), as_tensor(hi)
        hkv_t, group_t = as_tensor(heads_kv), as_tensor(group)
        cap = problem["softcap"]
        cap_t, cap_safe = as_tensor(cap, torch.float32), as_tensor(cap if cap > 0 else 1.0, torch.float32)
        sink_t = sink.float() if sink is not None else torch.zeros(heads_q, device=device)
        has_sink_t = torch.tensor(sink is not None, device=device)

        def mask_mod(b, h, q_idx, kv_idx):
            delta = kv_idx - q_idx % sq_t
            seen = (delta >= lo_t) & (delta <= hi_t) & (kv_idx < sk_t)
            return seen | ((kv_idx == sk_t) & has_sink_t)

        def score_mod(score, b, h, q_idx, kv_idx):
            capped = torch.where(cap_t > 0, cap_t * torch.tanh(score / cap_safe), score)
            head = (b % hkv_t) * group_t + q_idx // sq_t
            return torch.where(kv_idx == sk_t, sink_t[head], capped)

        self.score_mod = score_mod
        self.block_mask = create_block_mask(mask_mod, None, None, group * sq, self.k.shape[2], device=device)

    def run(self, scale, lse=False):
        flex = compiled_flex()
        if lse:
            out, aux = flex(self.q, self.k, self.v, score_mod=self.score_mod, block_mask=self.block_mask, scale=scale,
                            return_aux=AuxRequest(lse=True))
            return self.unfold(out), aux.lse.reshape(self.shape)
        return self.unfold(flex(self.q, self.k, self.v, score_mod=self.score_mod, block_mask=self.block_mask,
                                scale=scale))

    def unfold(self, out):
        return out.reshape(*self.shape, out.shape[-1])


def check(problem):
    if torch is None:
        raise NotImplementedError("torch: not importable here")
    if problem["seqlen_k"] == 0:
        raise NotImplementedError("seqlen_k: FlexAttention takes at least one key")
    return problem["batch"] > 0 and problem["heads_q"] > 0 and problem["seqlen_q"] > 0


def forward(problem, buffers):
    if not check(problem):
        return
    q, k, v, o, lse, sink = (fc.as_torch(buffers[n]) for n in ("q", "k", "v", "o", "lse", "sink"))
    with fc.on_stream(problem), torch.no_grad():
        out, row_lse = Folded(problem, q, k, v, sink).run(problem["softmax_scale"], lse=True)
        o.copy_(out)
        lse.copy_(row_lse)


def backward(problem, buffers):
    """Autograd through the same call: FlexAttention's backward kernel on dO (the O and LSE of the ABI's forward are
    recomputed by autograd's own forward, as training does)."""
    if not check(problem):
        return
    if buffers.get("dsink") is not None:
        raise NotImplementedError("sink: the sink's gradient is not taken through FlexAttention here")
    q, k, v = (fc.as_torch(buffers[n]).detach().requires_grad_() for n in ("q", "k", "v"))
    d_o, dq, dk, dv = (fc.as_torch(buffers[n]) for n in ("d_o", "dq", "dk", "dv"))
    with fc.on_stream(problem):
        out = Folded(problem, q, k, v, None).run(problem["softmax_scale"])
        out.backward(d_o)
        dq.copy_(q.grad)
        dk.copy_(k.grad)
        dv.copy_(v.grad)


@fc.subject(name="flex-attention", memory="device", dtypes=["f16", "bf16"], head_dims=[16, 32, 64, 128],
            masks=["none", "causal-br", "causal-tl", "window-br", "window-tl"], layouts=["bhsd", "bshd", "strided"],
            gqa=True, lse=True, softcap=True, sink=True, arithmetic={"f16": "tensor-core", "bf16": "tensor-core"},
            backward={"function": "backward", "arithmetic": {"f16": "tensor-core", "bf16": "tensor-core"}})
def attention(problem, buffers):
    forward(problem, buffers)
