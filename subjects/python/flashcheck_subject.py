"""Helpers for attention kernels written in Python put under flashcheck (flashcheck/python_bridge.h).

flashcheck's harness embeds CPython through its Python bridge and calls FUNCTION(problem, buffers) for the subject
spec python:MODULE:FUNCTION (--subject on the tools, FLASHCHECK_SUBJECT for the property tier and the fuzzers). What
the kernel computes is declared on the function with `subject(...)`; the harness draws cases inside it, runs them
under its guards (poisoned outputs, canaries, input hashes) and judges O and LSE against its exact oracle.

    import flashcheck_subject as fc

    @fc.subject(name="my-kernel", memory="device", dtypes=["f16", "bf16"], head_dim=[16, 128],
                masks=["none", "causal-br"], layouts=["bhsd"], arithmetic={"f16": "tensor-core", "bf16": "tensor-core"})
    def forward(problem, buffers):
        q, k, v, o, lse = (fc.as_torch(buffers[n]) for n in ("q", "k", "v", "o", "lse"))
        ...                          # write O (and LSE) in place; raise NotImplementedError for a case it does not do
"""

DTYPES = ("f32", "f16", "bf16")
MASKS = ("none", "causal-br", "causal-tl", "window-br", "window-tl")
LAYOUTS = ("bhsd", "bshd", "strided")
CLASSES = ("general-fp32", "tensor-core", "split-tf32", "undeclared")


SEQUENCE_FEATURES = ("varlen", "seqused_k", "paged", "splits")


def subject(name, dtypes, masks, layouts, head_dim=None, head_dims=None, memory="device", gqa=False, lse=True,
            softcap=False, sink=False, arithmetic=None, key_tile=0, head_dim_v=None, limits=None, sequences=None,
            backward=None, dropout=None, fp8=None):
    """Declares what the decorated function computes (the bridge reads it as the function's `flashcheck` dict):
    the fields of fc_subject_capabilities (head_dim [min, max], or head_dims: the list of head dims taken),
    fc_subject_arithmetic, fc_subject_limits, fc_subject_value_dims,
    fc_subject_sequences (`sequences`: {"features": [...], "page_size_multiple": 0, "max_splits": 0}; the function then
    also gets cases with sequences) and fc_subject_backward (`backward`: {"function": NAME, "arithmetic": {...},
    "sink": False, "sequences": False, "deterministic": False}; MODULE.NAME(problem, buffers) computes dQ, dK, dV) and
    fc_subject_dropout (`dropout`: {"arithmetic": {"f32": "general-fp32", ...}, "mask_dump": False, "sequences": False,
    "backward": False}; the function, and with "backward" the backward one, then also get problems whose dropout_p > 0,
    to be dropped with the documented mask, docs/design/dropout-rng.md) and fc_subject_fp8 (`fp8`: {"arithmetic":
    "tensor-core-fp8" (required), "descales": False, "key_tile": 0 (the declaration's key_tile), "key_tiles":
    {max_head_dim: key_tile, ...} (the tile per head dim, where it depends on it), "head_dim_multiple": 1 (fp8 head
    dims a multiple of this: fc_subject_fp8_head_dims)}; the function then also gets f8e4m3 problems: Q, K and V as e4m3
    bytes (as_e4m3), O bf16, and buffers["descale_q"], ["descale_k"], ["descale_v"], docs/design/fp8-forward.md) by name.
    A value outside these names raises ValueError here, before the harness ever loads it."""
    for value, allowed, field in ((dtypes, DTYPES, "dtypes"), (masks, MASKS, "masks"), (layouts, LAYOUTS, "layouts")):
        unknown = [x for x in value if x not in allowed]
        if unknown:
            raise ValueError(f"{field}: unknown {unknown} (known: {list(allowed)})")
    for dtype, cls in (arithmetic or {}).items():
        if dtype not in DTYPES or cls not in CLASSES:
            raise ValueError(f"arithmetic: {dtype!r}: {cls!r} (dtypes {list(DTYPES)}, classes {list(CLASSES)})")
    if memory not in ("host", "device"):
        raise ValueError("memory: 'host' or 'device'")
    declaration = {"name": name, "memory": memory, "dtypes": list(dtypes), "masks": list(masks),
                   "layouts": list(layouts), "gqa": bool(gqa), "lse": bool(lse), "softcap": bool(softcap),
                   "sink": bool(sink), "arithmetic": dict(arithmetic or {}), "key_tile": int(key_tile)}
    if head_dims is not None and head_dim is None and len(head_dims) > 0:
        declaration["head_dims"] = [int(d) for d in head_dims]
    elif head_dims is None and isinstance(head_dim, (list, tuple)) and len(head_dim) == 2:
        declaration["head_dim"] = [int(head_dim[0]), int(head_dim[1])]
    else:
        raise ValueError("head_dim: [min, max], or head_dims: [d, ...] (one of the two)")
    if head_dim_v is not None:
        declaration["head_dim_v"] = [int(head_dim_v[0]), int(head_dim_v[1])]
    if limits is not None:
        declaration["limits"] = {key: int(value) for key, value in limits.items()}
    if sequences is not None:
        unknown = [x for x in sequences.get("features", []) if x not in SEQUENCE_FEATURES]
        if unknown or not sequences.get("features"):
            raise ValueError(f"sequences.features: a non-empty list of {list(SEQUENCE_FEATURES)}, not {unknown}")
        declaration["sequences"] = {"features": list(sequences["features"]),
                                    "page_size_multiple": int(sequences.get("page_size_multiple", 0)),
                                    "max_splits": int(sequences.get("max_splits", 0))}
    for field, value, known in (("backward", backward, ("function", "arithmetic", "sink", "sequences", "deterministic")),
                                ("dropout", dropout, ("arithmetic", "mask_dump", "sequences", "backward")),
                                ("fp8", fp8, ("arithmetic", "descales", "key_tile", "key_tiles", "head_dim_multiple"))):
        unknown = sorted(set(value or {}) - set(known))
        if unknown:
            raise ValueError(f"{field}: unknown keys {unknown} (known: {list(known)})")
    if backward is not None:
        if not isinstance(backward.get("function"), str):
            raise ValueError("backward.function: the name of the module's backward callable")
        declaration["backward"] = {"function": backward["function"], "arithmetic": dict(backward.get("arithmetic", {})),
                                   "sink": bool(backward.get("sink", False)),
                                   "sequences": bool(backward.get("sequences", False)),
                                   "deterministic": bool(backward.get("deterministic", False))}
    if dropout is not None:
        classes = dict(dropout.get("arithmetic", {}))
        if not classes or any(d not in DTYPES or c != "general-fp32" for d, c in classes.items()):
            raise ValueError(f"dropout.arithmetic: {{dtype: 'general-fp32'}} for at least one dtype, not {classes}")
        if dropout.get("backward") and backward is None:
            raise ValueError("dropout.backward: needs the backward pass declared (backward={...})")
        declaration["dropout"] = {"arithmetic": classes, "mask_dump": bool(dropout.get("mask_dump", False)),
                                  "sequences": bool(dropout.get("sequences", False)),
                                  "backward": bool(dropout.get("backward", False))}

    if fp8 is not None:
        if fp8.get("arithmetic") != "tensor-core-fp8":
            raise ValueError(f"fp8.arithmetic: 'tensor-core-fp8' (the error model's one fp8 class), not {fp8.get('arithmetic')!r}")
        declaration["fp8"] = {"arithmetic": "tensor-core-fp8", "descales": bool(fp8.get("descales", False)),
                              "key_tile": int(fp8.get("key_tile", 0))}
        if "key_tiles" in fp8:
            tiles = fp8["key_tiles"]
            if not isinstance(tiles, dict) or not all(isinstance(d, int) and isinstance(t, int) and d > 0 and t > 0
                                                      for d, t in tiles.items()):
                raise ValueError(f"fp8.key_tiles: {{max_head_dim: key_tile}} of positive ints, not {tiles!r}")
            declaration["fp8"]["key_tiles"] = {int(d): int(t) for d, t in sorted(tiles.items())}
        if "head_dim_multiple" in fp8:
            multiple = fp8["head_dim_multiple"]
            if not isinstance(multiple, int) or multiple < 1:
                raise ValueError(f"fp8.head_dim_multiple: a positive int, not {multiple!r}")
            declaration["fp8"]["head_dim_multiple"] = multiple

    def mark(function):
        function.flashcheck = declaration
        return function
    return mark


def as_torch(buffer):
    """A torch tensor aliasing one of the harness's buffers (no copy): device buffers through
    __cuda_array_interface__, host ones through the buffer protocol and numpy; bf16's bits (uint16) come back as
    torch.bfloat16. None stays None. The tensor lives for the call only (python_bridge.h)."""
    if buffer is None:
        return None
    import torch
    if hasattr(buffer, "__cuda_array_interface__"):
        bf16 = buffer.__cuda_array_interface__["typestr"] == "<u2"
        tensor = torch.as_tensor(buffer, device="cuda")
    else:  # a memoryview, any strides: numpy reads it without a copy, torch.from_numpy keeps the strides
        import numpy
        bf16 = buffer.format == "H"
        tensor = torch.from_numpy(numpy.asarray(buffer))
    return tensor.view(torch.bfloat16) if bf16 else tensor


def as_e4m3(buffer):
    """An f8e4m3 case's Q, K or V (e4m3 bytes) as a torch.float8_e4m3fn tensor aliasing the buffer, or None."""
    import torch
    tensor = as_torch(buffer)
    return None if tensor is None else tensor.view(torch.float8_e4m3fn)


def on_stream(problem):
    """A context under which torch (and Triton, which launches on torch's current stream) enqueues on the harness's
    stream, problem["stream"]: the harness orders its guards and its reads of the outputs on that stream alone."""
    import torch
    pointer = problem["stream"]
    return torch.cuda.stream(torch.cuda.ExternalStream(pointer) if pointer else torch.cuda.default_stream())


def key_window(problem):
    """(lo, hi): query row i sees keys i + lo .. i + hi (attention.h's visibility for the problem's mask and window, in
    its alignment; an unbounded side spans every key). Both lie in [-seqlen_q - 1, seqlen_k + 1]: past that every row
    sees the same keys, and a kernel that takes them as 32-bit integers (Triton types a Python int past 2^31 as i64)
    meets the same values for every window wider than the sequences (1 << 40 among them)."""
    sq, sk, mask = problem["seqlen_q"], problem["seqlen_k"], problem["mask"]
    align = sk - sq if mask.endswith("-br") else 0
    if mask == "none":
        return -sq - 1, sk + 1
    left, right = (-1, 0) if mask.startswith("causal") else (problem["window_left"], problem["window_right"])
    lo = -sq - 1 if left < 0 else align - left
    hi = sk + 1 if right < 0 else align + right
    return min(max(lo, -sq - 1), sk + 1), min(max(hi, -sq - 1), sk + 1)
