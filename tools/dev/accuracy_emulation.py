#!/usr/bin/env python3
"""Float emulation of the tensor-core family's online softmax, for accuracy studies without a GPU.

Emulates one attention head at a time with ideal arithmetic at the kernel's rounding points: fp32 scores (exact
products, one rounding), x = fl(s c), p = exp2(x - r) in fp32, l summed in fp32, P rounded to bf16/fp16 before
P V, P V summed exactly and rounded into the fp32 accumulator, O = acc / l rounded to the dtype. The float64
reference is computed on the same rounded inputs. Reports, per configuration of bench/side_by_side.py's accuracy
table, each variant's relative RMS error over the first variant's (geometric mean over seeds, and in how many
seeds it is lower or equal).

Variants (docs/design/tensor-core-kernel.md, "Accuracy"):
  running   p relative to the running max (FlashAttention's usual formulation)
  tile      p relative to the tile's own max within 8 log2 units of the running max (the kernels' rule)
  fa2       FlashAttention-2's formulation: fma exponent, acc * (1/l), K/V tiles in reverse order
  narrow    as `running` with 64-key tiles instead of 128
  l_rounded as `tile` with l summed from the rounded P
Add a variant to VARIANTS (keyword arguments of flash()) to predict an algorithmic change before building it.

usage: tools/dev/accuracy_emulation.py [--seeds N] [--dtype bf16|f16]   (numpy; about 5 s per seed on 2 cores)
"""
import argparse
import math

try:
    import numpy as np
except ImportError:  # --help needs no numpy; main() stops with the reason
    np = None

LOG2E = 1.4426950408889634


def round_to(x, dtype):
    """Round fp32 values to bf16 or fp16 (nearest, ties to even), returned as fp32."""
    x = np.asarray(x, np.float32)
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32)


def reference(q, k, v, causal):
    s = q.astype(np.float64) @ k.astype(np.float64).T / math.sqrt(q.shape[1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape, bool)), s, -np.inf)
    p = np.exp(s - s.max(1, keepdims=True))
    return (p @ v.astype(np.float64)) / p.sum(1, keepdims=True)


def flash(q, k, v, causal, dtype, block_n, tile_ref=False, slack=8.0, fma_exponent=False, reverse=False,
          reciprocal=False, l_rounded=False):
    n, d = q.shape
    c = np.float32(LOG2E / math.sqrt(d))
    scores = (q.astype(np.float64) @ k.astype(np.float64).T).astype(np.float32)
    run_max = np.full(n, -np.inf, np.float32)  # raw scores
    ref = np.full(n, -np.inf, np.float32)
    l = np.zeros(n, np.float32)
    acc = np.zeros((n, d), np.float32)
    tiles = list(range((n + block_n - 1) // block_n))
    rows = np.arange(n)
    for t in (tiles[::-1] if reverse else tiles):
        k0 = t * block_n
        s = scores[:, k0:k0 + block_n]
        if causal:
            s = np.where(np.arange(k0, k0 + s.shape[1])[None, :] <= rows[:, None], s, np.float32(-np.inf))
        tile_max = s.max(1)
        run_max = np.maximum(run_max, tile_max)
        new_ref = run_max
        if tile_ref:
            local = (tile_max * c).astype(np.float32) >= (run_max * c).astype(np.float32) - np.float32(slack)
            new_ref = np.where(tile_max == -np.inf, ref, np.where(local, tile_max, run_max))
        base = np.where(new_ref == -np.inf, np.float32(0), (new_ref * c).astype(np.float32))
        with np.errstate(invalid="ignore", over="ignore"):
            if fma_exponent:
                e = (s.astype(np.float64) * np.float64(c) - base[:, None]).astype(np.float32)
            else:
                e = (s * c).astype(np.float32) - base[:, None]
            p = np.nan_to_num(np.exp2(e.astype(np.float64)).astype(np.float32), nan=0.0)
            alpha = np.exp2(((ref * c).astype(np.float32) - base).astype(np.float64)).astype(np.float32)
        alpha = np.nan_to_num(alpha, nan=0.0)
        p_rounded = round_to(p, dtype)
        l = (l * alpha + (p_rounded if l_rounded else p).sum(1, dtype=np.float32)).astype(np.float32)
        acc = (acc * alpha[:, None]).astype(np.float32)
        acc = (acc + p_rounded.astype(np.float64) @ v[k0:k0 + block_n].astype(np.float64)).astype(np.float32)
        ref = new_ref
    o = acc * (np.float32(1) / l)[:, None] if reciprocal else acc / l[:, None]
    return round_to(o.astype(np.float32), dtype)


VARIANTS = {
    "running": dict(block_n=128),
    "tile": dict(block_n=128, tile_ref=True),
    "fa2": dict(block_n=64, fma_exponent=True, reverse=True, reciprocal=True),
    "narrow": dict(block_n=64),
    "l_rounded": dict(block_n=128, tile_ref=True, l_rounded=True),
}
CONFIGS = [(1024, 64, False, 1.0), (1024, 128, True, 1.0), (1024, 128, False, 8.0), (1000, 96, True, 1.0),
           (4096, 128, False, 1.0)]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--dtype", choices=("bf16", "f16"), default="bf16")
    args = parser.parse_args()
    if np is None:
        parser.error("needs numpy (pip install numpy)")
    names = list(VARIANTS)
    print("| N | d | causal | amp | " + " | ".join(f"{v} / {names[0]}" for v in names[1:]) + " |")
    print("|---|---|---|---|" + "---|" * (len(names) - 1))
    for n, d, causal, amp in CONFIGS:
        errors = {name: [] for name in names}
        for seed in range(args.seeds):
            rng = np.random.default_rng(seed)
            q = round_to((rng.standard_normal((n, d)) * amp).astype(np.float32), args.dtype)
            k = round_to((rng.standard_normal((n, d)) * amp).astype(np.float32), args.dtype)
            v = round_to(rng.standard_normal((n, d)).astype(np.float32), args.dtype)
            ref = reference(q, k, v, causal)
            for name in names:
                o = flash(q, k, v, causal, args.dtype, **VARIANTS[name])
                errors[name].append(math.sqrt(((o - ref) ** 2).sum() / (ref * ref).sum()))
        base = np.array(errors[names[0]])
        cells = []
        for name in names[1:]:
            ratio = np.array(errors[name]) / base
            cells.append(f"{math.exp(np.log(ratio).mean()):.4f} ({int((ratio <= 1).sum())}/{args.seeds})")
        print(f"| {n} | {d} | {causal} | {amp} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
