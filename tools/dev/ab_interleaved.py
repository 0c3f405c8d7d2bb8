#!/usr/bin/env python3
"""Interleaved A/B of libflashcheck.so builds on one GPU, for kernel changes that must not change a bit.

Each point (bf16 unless noted; B*N = 16384 tokens dense, 32768 windowed; H*d = 2048) is timed on every library in
turn, --passes times over, each time the median of --iters CUDA-event-timed runs with the L2 flushed before each
(bench/side_by_side.py's Timer); the median pass is reported, so clock drift reaches every library alike (sequential
sweeps of one build move a point by up to 10%: tools/dev/ab_round.sh). --back-to-back times instead the mean of
--iters calls run back to back with nothing between them (the steady state of repeated calls): launch gaps and
what one call's launches leave to the next count there, and the flush between calls hides them (docs/design/
tensor-core-kernel.md, "Two launches").

It also checks what a scheduling change must keep: O and LSE bit-identical to the first library's at every timed
point (finite inputs), O bit-identical (NaNs included) on small causal and windowed problems with inf, -inf and
NaN scattered through V, which exercise the exact hidden-V path (docs/design/tensor-core-kernel.md), and O and LSE
bit-identical on shapes the timed points miss: a head dim 24 below each family's (a tail chunk of dims) and
sequence lengths 1, 33 and 333 (tails in every tile), causal and not.

Usage (Hopper machine with PyTorch; each LIB is target flashcheck_shared of a build, the first is the baseline):
    python3 tools/dev/ab_interleaved.py BASE.so VARIANT.so [...] [--dims 64,128] [--passes 5] [--iters 10]
        [--only 'causal=False,W=256']   (time only the points whose label contains one of the substrings)
        [--back-to-back]
Build variants side by side from one tree with -DCMAKE_CUDA_FLAGS=-DSOME_SWITCH and, for a short compile,
-DFLASHCHECK_KERNEL_FAMILIES=tensor_core; --dims keeps the points the built families serve. --fp32 times fp32
points instead (d = 64 and 128, N = 256..4096, causal and not: the split-TF32 wgmma kernel), with the same bitwise
checks; build those with "-DFLASHCHECK_KERNEL_FAMILIES=tensor_core;split_tf32" (the wgmma kernels of both
families share the tensor-core family's sm_90a switch) and, for a short compile, one entry in tile_config.h's
kFamilies.
Prints one line per point: TFLOP/s per library, X/BASE per variant, bitwise same/DIFF per variant; then per
variant the geometric mean, minimum and maximum of X/BASE.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import side_by_side as sbs  # noqa: E402  (Flashcheck, Timer)

DENSE = ((64, False, (512, 2048, 8192, 16384)), (64, True, (512, 1024, 2048, 4096, 16384)),
         (128, False, (512, 1024, 4096, 8192, 16384)), (128, True, (512, 1024, 2048, 4096, 8192, 16384)),
         (256, False, (512, 2048, 8192)), (256, True, (512, 1024, 2048, 8192)))
WINDOWED = ((64, 4096, 256), (64, 8192, 256), (64, 8192, 1024), (64, 8192, 4096), (128, 8192, 256),
            (128, 8192, 1024), (128, 8192, 4096), (128, 4096, 256), (256, 8192, 256), (256, 8192, 1024))


FP32_DIMS = (64, 128)  # the split-TF32 wgmma kernel's head dims
FP32 = ((False, (256, 1024, 4096)), (True, (1024, 4096)))


def points(dims, fp32=False):
    torch = sbs.torch
    if fp32:
        return [(torch.float32, d, causal, n, None) for d in FP32_DIMS if d in dims for causal, ns in FP32 for n in ns]
    pts = [(torch.bfloat16, d, causal, n, None) for d, causal, ns in DENSE if d in dims for n in ns]
    pts += [(torch.float16, 128, True, n, None) for n in (512, 2048) if 128 in dims]
    pts += [(torch.bfloat16, d, True, n, w) for d, n, w in WINDOWED if d in dims]
    return pts


def empty_outputs(libs, q):
    """One (O, LSE) pair per library for inputs shaped like q ([B, H, N, d])."""
    torch = sbs.torch
    b, h, n, _ = q.shape
    return [(torch.empty_like(q), torch.empty(b, h, n, dtype=torch.float32, device="cuda")) for _ in libs]


def run_once(libs, q, k, v, causal, **feats):
    """Each library's (O, LSE) on the same inputs, synchronized."""
    outs = empty_outputs(libs, q)
    for lib, out in zip(libs, outs):
        lib.bound_call(q, k, v, causal, out, **feats)()
    sbs.torch.cuda.synchronize()
    return outs


def same_bits(out, base):
    """O and LSE bit-identical (finite outputs)."""
    return sbs.torch.equal(out[0], base[0]) and sbs.torch.equal(out[1], base[1])


ODD_DIM_BELOW = 24  # odd_shape_check's head dim: each timed head dim less this, served by the same family
ODD_SEQLENS = (1, 33, 333)


def odd_shape_check(libs, dims, dtype):
    torch = sbs.torch
    for d in dims:
        dd = d - ODD_DIM_BELOW
        if dd < 1:
            continue
        diff = []
        for n in ODD_SEQLENS:
            for causal in (False, True):
                g = torch.Generator(device="cuda").manual_seed(dd * 7919 + n)
                b, h = 2, 3
                q, k, v = (torch.randn(b, h, n, dd, dtype=dtype, device="cuda", generator=g) for _ in range(3))
                outs = run_once(libs, q, k, v, causal)
                if not all(same_bits(o, outs[0]) for o in outs[1:]):
                    diff.append(f"N={n} causal={causal}")
        print(f"odd shapes, d={dd}, N in {ODD_SEQLENS}, causal and not: " +
              ("same bits as the baseline" if not diff else "DIFF at " + ", ".join(diff)), flush=True)


def nonfinite_check(libs, dims, dtype):
    torch = sbs.torch
    for d in dims:
        for w in (None, 200):
            g = torch.Generator(device="cuda").manual_seed(d)
            b, h, n = 2, 3, 700
            q, k, v = (torch.randn(b, h, n, d, dtype=dtype, device="cuda", generator=g) for _ in range(3))
            sel = torch.rand(q.shape, device="cuda", generator=g)
            v[sel < 2e-4] = float("inf")
            v[(sel >= 2e-4) & (sel < 4e-4)] = float("nan")
            v[(sel >= 4e-4) & (sel < 5e-4)] = -float("inf")
            outs = run_once(libs, q, k, v, True, **({"window": (w - 1, 0)} if w else {}))
            nans = outs[0][0].isnan().sum().item()
            bits = lambda t: t.nan_to_num(7.0, 8.0, 9.0)  # noqa: E731  (NaN and +-inf to distinct finite values)
            same = [torch.equal(bits(o[0]), bits(outs[0][0])) for o in outs[1:]]
            print(f"non-finite V, d={d} causal W={w}: NaN in O {nans} of {outs[0][0].numel()}; "
                  f"same bits as the baseline: {same}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("libs", nargs="+", help="libflashcheck.so paths; the first is the baseline")
    ap.add_argument("--dims", default="64,128,256", help="head dims to run (those the builds compile)")
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--fp32", action="store_true",
                    help="the fp32 points instead (split-TF32 kernels, d 64 and 128 of --dims)")
    ap.add_argument("--only", default="",
                    help="time only the points whose label (e.g. 'd=128 causal=False N=8192') contains one of these "
                         "','-separated substrings")
    ap.add_argument("--back-to-back", action="store_true",
                    help="time the mean of --iters calls back to back, no L2 flush between them")
    args = ap.parse_args()
    if sbs.torch is None:
        sys.exit("ab_interleaved.py needs PyTorch with CUDA")
    if len(args.libs) < 2:
        sys.exit("ab_interleaved.py: give a baseline and at least one variant")
    torch = sbs.torch
    dims = {int(x) for x in args.dims.split(",")}
    libs = [sbs.Flashcheck(p) for p in args.libs]
    timer = sbs.Timer(3, args.iters)
    time_ms = timer.back_to_back_ms if args.back_to_back else timer.median_ms
    checked = sorted(d for d in dims if not args.fp32 or d in FP32_DIMS)
    check_dtype = torch.float32 if args.fp32 else torch.bfloat16
    nonfinite_check(libs, checked, check_dtype)
    odd_shape_check(libs, checked, check_dtype)
    ratios = {i: [] for i in range(1, len(libs))}
    only = [x for x in args.only.split(",") if x]
    for dt, d, causal, n, w in points(dims, args.fp32):
        label = f"{str(dt)[6:]} d={d} causal={causal} N={n} W={w}"
        if only and not any(x in label for x in only):
            continue
        h = 2048 // d
        b = max(1, (32768 if w else 16384) // n)
        g = torch.Generator(device="cuda").manual_seed(n + d)
        q, k, v = (torch.randn(b, h, n, d, dtype=dt, device="cuda", generator=g) for _ in range(3))
        outs = empty_outputs(libs, q)
        feats = {"window": (w - 1, 0)} if w else {}
        calls = [lib.bound_call(q, k, v, causal, out, **feats) for lib, out in zip(libs, outs)]
        pairs = (w * (w + 1) // 2 + (n - w) * w) if w else (n * (n + 1) // 2 if causal else n * n)
        flops = 4 * b * h * d * pairs
        res = [[] for _ in libs]
        for _ in range(args.passes):
            for i, call in enumerate(calls):
                res[i].append(flops / (time_ms(call) * 1e-3) / 1e12)
        med = [statistics.median(r) for r in res]
        same = ["same" if same_bits(o, outs[0]) else "DIFF" for o in outs[1:]]
        for i in ratios:
            ratios[i].append(med[i] / med[0])
        print(f"{label}: " + " ".join(f"{m:.1f}" for m in med) +
              " | " + " ".join(f"{m / med[0]:.3f}" for m in med[1:]) + f" bitwise={','.join(same)}",
              flush=True)
        del q, k, v, outs, calls
    if only and not ratios[1]:
        sys.exit(f"ab_interleaved.py: --only '{args.only}' matches no timed point")
    for i, r in ratios.items():
        print(f"{args.libs[i]}: geomean {statistics.geometric_mean(r):.3f} min {min(r):.3f} max {max(r):.3f}")


if __name__ == "__main__":
    main()
