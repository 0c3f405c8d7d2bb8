"""Runs the Triton example's kernel (subjects/python/triton_attention.py) in Triton's interpreter, without a GPU, against
attention in double precision: GQA, sinks with a softcap, no keys, fp16, and fp32's dropout (its mask dump against the
documented mask of docs/design/dropout-rng.md, as subjects/python/naive_attention.py draws it). It launches through the
example's own launch(), as the bridge's calls do. ctest triton_example_interpreted
(label cpu) runs it where Triton and torch import and skips (exit 77) where they do not; the GPU tier's
subject_triton_example holds the compiled kernel to flashcheck's oracle.

    TRITON_INTERPRET=1 python3 subjects/python/tests/triton_interpreter_check.py
"""
import math
import os
import sys
import types

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
try:
    import torch
    import triton.language as tl
except ImportError:
    print("flashcheck-skip: triton or torch is not importable here")
    sys.exit(77)

import naive_attention
import triton_attention

# The interpreter has no libdevice: tanh from exp, for the softcap.
triton_attention.libdevice = types.SimpleNamespace(tanh=lambda x: 2.0 / (1.0 + tl.exp(-2.0 * x)) - 1.0)


def check(name, batch, heads, heads_kv, seqlen_q, seqlen_k, dim, dtype=torch.float32, sink=False, softcap=0.0,
          p=0.0, seed=0, offset=0, tolerance=1e-6):
    """One launch against the double-precision reference; returns the failures' descriptions."""
    gen = torch.Generator().manual_seed(seqlen_q * 1000 + seqlen_k)
    q = torch.randn(batch, heads, seqlen_q, dim, generator=gen).to(dtype)
    k = torch.randn(batch, heads_kv, seqlen_k, dim, generator=gen).to(dtype)
    v = torch.randn(batch, heads_kv, seqlen_k, dim, generator=gen).to(dtype)
    sinks = torch.randn(heads, generator=gen) if sink else None
    o = torch.zeros(batch, heads, seqlen_q, dim, dtype=dtype)
    lse = torch.zeros(batch, heads, seqlen_q)
    dump = torch.full((batch, heads, seqlen_q, seqlen_k), 7, dtype=torch.uint8)
    scale = 1 / math.sqrt(dim)
    problem = dict(dtype={torch.float32: "f32", torch.float16: "f16"}[dtype], batch=batch, heads_q=heads,
                   heads_kv=heads_kv, seqlen_q=seqlen_q, seqlen_k=seqlen_k, head_dim=dim, softmax_scale=scale,
                   softcap=softcap, mask="none", dropout_p=p, dropout_seed=seed, dropout_offset=offset)
    # As the bridge hands them over: no K and V buffers for no keys.
    no_keys = seqlen_k == 0
    triton_attention.launch(problem, q, None if no_keys else k, None if no_keys else v, o, lse,
                            sinks if sink else None, dump if p > 0 else None, tail_bug=False)
    group = heads // heads_kv
    s = q.double() @ k.double().repeat_interleave(group, 1).transpose(-1, -2) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    if sink:
        s = torch.cat([s, sinks.double().view(1, heads, 1, 1).expand(batch, heads, seqlen_q, 1)], -1)
    weights, want_lse = torch.softmax(s, -1)[..., :seqlen_k], torch.logsumexp(s, -1)
    failures = []
    if p > 0:
        drop = naive_attention.Dropout({"heads_q": heads, "dropout_p": p, "dropout_seed": seed, "dropout_offset": offset})
        kept = torch.tensor([[[[drop.kept(b, h, i, j) for j in range(seqlen_k)] for i in range(seqlen_q)]
                              for h in range(heads)] for b in range(batch)], dtype=torch.uint8)
        if not torch.equal(dump, kept):
            failures.append(f"{name}: the mask dump is not the documented mask")
        weights = weights * kept.double() / (1 - p)
    want_o = weights @ v.double().repeat_interleave(group, 1)
    o_err, lse_err = (o.double() - want_o).abs().max().item(), (lse.double() - want_lse).abs().max().item()
    if not (o_err <= tolerance and lse_err <= 1e-5):
        failures.append(f"{name}: O off by {o_err:.3g} (tolerance {tolerance}), LSE by {lse_err:.3g}")
    return failures


def main():
    failures = []
    failures += check("fp32, GQA, two query tiles", 1, 2, 1, 70, 100, 40)
    failures += check("fp32, sink and softcap", 2, 4, 2, 65, 130, 24, sink=True, softcap=5.0)
    failures += check("fp32, dropout with a sink, offset wrapping past 2^64", 1, 2, 2, 70, 100, 16, sink=True, p=0.5,
                      seed=0xF234567890ABCDEF, offset=(1 << 64) - 1)
    failures += check("fp32, no keys: the sink takes the row", 2, 2, 1, 5, 0, 8, sink=True)
    failures += check("fp16, sink", 1, 2, 1, 33, 70, 64, dtype=torch.float16, sink=True, tolerance=2e-3)
    for failure in failures:
        print("FAIL:", failure)
    if not failures:
        print("ok: the Triton example agrees with double-precision attention in Triton's interpreter (5 launches)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
