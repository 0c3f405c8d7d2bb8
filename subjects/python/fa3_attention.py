"""FlashAttention-3's forward (the `fa3-fwd` wheel: a build of FlashAttention's hopper/ tree, bf16 and fp8, forward
only) as a peer subject. It is called as its users call it, through fa3_fwd_interface's op on [B, S, H, D] views of
flashcheck's buffers (Q, K, V aliased, no copy; O and LSE copied out of FA3's own outputs).

What this build serves, declared below: bf16 (its fp16 path is compiled out) and fp8 (e4m3 Q, K and V with
[B, H_kv] descales, O in bf16: fc_subject_fp8_v1), head dims that are multiples of 8 up to 256 (of 16 for fp8, whose
rows are one byte an element: fp8's head_dim_multiple), no mask or causal in FA3's alignment (bottom-right; its local windows are compiled out), softcap, GQA, LSE,
packed variable-length batches (cu_seqlens_q / cu_seqlens_k), seqused_k and split-KV (num_splits). Paged K/V is
compiled out of the wheel, and FA3 has no sink argument. FA3's TMA loads need 16-byte aligned rows: a case whose
strides or base pointers are not is refused (UNSUPPORTED), as FA3's own check would refuse it. A problem FA3 declines
with a checked error (RuntimeError without "CUDA error") is UNSUPPORTED with its message; a CUDA error is a failure.

fp8 is judged in the error model's one fp8 class (tensor-core-fp8, docs/design/fp8-forward.md) with FA3's key tile
per head dim: hopper/tile_size.h's tile_size_fwd_sm90 for one-byte elements without a local window or paged K/V gives
160, 128, 224, 160 and 128 keys up to head dims 64, 96, 128, 192 and 256, and the wheel's e4m3 kernels are the
instantiations of those tiles alone (the tile shapes in their symbols: 192x160x64, 192x128x96, 128x224x128,
128x160x192, 128x128x256). FA3 accumulates P V into O's wgmma
accumulator across tiles where the class promotes each tile's products into fp32, so long rows may lie outside the
class: a GPU run decides, and such a deviation is stored as a finding with its note (known_deviations.txt).

    FLASHCHECK_SUBJECT=python:fa3_attention:attention properties_gpu
    flashcheck-report --subject python:fa3_attention:attention
"""
import flashcheck_subject as fc

try:
    import torch
    import fa3_fwd_interface
except ImportError:
    fa3_fwd_interface = None

DECLARATION = dict(name="fa3", memory="device", dtypes=["bf16"], head_dims=list(range(8, 257, 8)),
                   masks=["none", "causal-br"], layouts=["bhsd", "bshd", "strided"], gqa=True, lse=True, softcap=True,
                   arithmetic={"bf16": "tensor-core"},
                   sequences={"features": ["varlen", "seqused_k", "splits"], "max_splits": 64},
                   fp8={"arithmetic": "tensor-core-fp8", "descales": True, "head_dim_multiple": 16,
                        "key_tiles": {64: 160, 96: 128, 128: 224, 192: 160, 256: 128}})


def aligned(tensor):
    """FA3's TMA descriptors: a 16-byte aligned base and strides that are multiples of 16 bytes (8 bf16, 16 e4m3)."""
    return tensor.data_ptr() % 16 == 0 and all(s * tensor.element_size() % 16 == 0 for s in tensor.stride()[:-1]) \
        and tensor.stride(-1) == 1


def rows_first(tensor, packed):
    """[B, H, S, D] -> [B, S, H, D] (a view); packed [total, H, D] stays as it is."""
    return tensor if packed else tensor.transpose(1, 2)


def forward_fa3(problem, buffers):
    if fa3_fwd_interface is None:
        raise NotImplementedError("fa3_fwd_interface: not importable here (install the fa3-fwd wheel on a Hopper GPU)")
    if problem["batch"] == 0 or problem["heads_q"] == 0 or problem["seqlen_q"] == 0:
        return
    fp8 = problem["dtype"] == "f8e4m3"
    if fp8 and problem["head_dim"] % 16 != 0:
        raise NotImplementedError(f"head_dim: {problem['head_dim']}, fp8 needs a multiple of 16 (FA3's TMA rows)")
    q, k, v = ((fc.as_e4m3 if fp8 else fc.as_torch)(buffers[n]) for n in ("q", "k", "v"))
    o, lse = (fc.as_torch(buffers[n]) for n in ("o", "lse"))
    # fp8: the [B, H_kv] fp32 descales, or None (1), as FA3 takes them.
    descales = {f"{n}_descale": fc.as_torch(buffers.get(f"descale_{n}")) for n in ("q", "k", "v")} if fp8 else {}
    cu_q, cu_k, used_k = (fc.as_torch(buffers.get(n)) for n in ("cu_seqlens_q", "cu_seqlens_k", "seqused_k"))
    if k is None or v is None:  # no K/V slot at all (every sequence without keys): FA3 gets empty packed tensors
        if cu_k is None:
            raise NotImplementedError("keys: a dense case without keys")
        k = v = torch.empty((0, problem["heads_kv"], problem["head_dim"]), device=q.device, dtype=q.dtype)
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not aligned(tensor):
            raise NotImplementedError(f"{name}: rows not 16-byte aligned (strides {tuple(tensor.stride())}); FA3's TMA "
                                      "loads need them")
    with fc.on_stream(problem):
        try:
            out, softmax_lse, *_ = fa3_fwd_interface._flash_attn_forward(
                rows_first(q, cu_q is not None), rows_first(k, cu_k is not None), rows_first(v, cu_k is not None),
                cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, seqused_k=used_k,
                max_seqlen_q=problem["seqlen_q"] if cu_q is not None else None,
                max_seqlen_k=problem["seqlen_k"] if cu_k is not None else None,
                softmax_scale=problem["softmax_scale"], causal=problem["mask"] == "causal-br",
                softcap=problem["softcap"], num_splits=max(1, problem.get("num_splits", 1)), **descales)
        except RuntimeError as error:
            if "CUDA error" in str(error) or isinstance(error, getattr(torch, "AcceleratorError", ())):
                raise
            raise NotImplementedError(f"fa3: {error}") from None
        rows_first(o, cu_q is not None).copy_(out)
        lse.copy_(softmax_lse)


@fc.subject(**DECLARATION)
def attention(problem, buffers):
    forward_fa3(problem, buffers)
