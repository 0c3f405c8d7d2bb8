#!/usr/bin/env python3
"""flashcheck, cuDNN and FlashAttention-2 (PyTorch SDPA) timed two ways on the same tensors, fp16 and bf16 alike,
with bench/side_by_side.py's Timer in both of its modes:
- sync (side_by_side.py's default): L2 flushed, an event, one call, an event, then wait for it. Whatever the host
  spends on a call beyond the flush's GPU time (a memset of twice the L2) lies between the events.
- queued: the same flush, events and call, but the host queues every run behind a GPU sleep before the first
  starts. It stays ahead of the GPU, so the events time only what the GPU does.

Where the two agree, a backend's host cost is hidden behind the flush. Where sync is lower, the host is in the
figure, and how much of it can change from run to run. --accuracy adds each backend's relative RMS error of O
against float64 SDPA at the same points (B = 2, H = 4, N at most 2048, three seeds, inputs randn * amp for amp
1, 4 and 8).
That tells whether a backend computes differently in fp16 than in bf16, say with an fp16 exponential.

usage: python3 tools/dev/sync_vs_queued.py --lib build/gpu/bench/libflashcheck.so [--accuracy] [--rounds 3]
Prints one JSON line per point, TFLOP/s as <dtype>_<backend>_<sync|queued> (median over the rounds, each round a
median of --iters runs), and writes them to $OUT/sync_vs_queued.json.
"""
import argparse
import json
import os
import statistics
import sys
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
POINTS = [(64, True, 512), (64, True, 1024), (64, True, 2048), (128, True, 512), (128, True, 1024),
          (256, True, 512), (256, True, 1024), (128, False, 512), (64, False, 8192), (128, False, 8192)]
BACKENDS = ("flashcheck", "cudnn", "flash")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="libflashcheck.so (target flashcheck_shared)")
    ap.add_argument("--iters", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved passes over the backends per point")
    ap.add_argument("--accuracy", action="store_true", help="also each backend's relative RMS error per point")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import side_by_side as sbs
    warnings.filterwarnings("ignore", category=UserWarning)
    fc = sbs.Flashcheck(args.lib)
    timers = {"sync": sbs.Timer(3, args.iters), "queued": sbs.Timer(3, args.iters, queued=True)}

    def rel_rms(dtype, d, causal, n):
        errs = {name: [] for name in BACKENDS}
        for seed in range(3):
            for amp in (1.0, 4.0, 8.0):
                gen = torch.Generator(device="cuda").manual_seed(seed)
                q, k = ((torch.randn(2, 4, n, d, device="cuda", generator=gen) * amp).to(dtype) for _ in range(2))
                v = torch.randn(2, 4, n, d, device="cuda", generator=gen).to(dtype)
                with sdpa_kernel([SDPBackend.MATH]):
                    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
                for name in BACKENDS:
                    o = fc.forward(q, k, v, causal) if name == "flashcheck" else sbs.sdpa(name, q, k, v, causal)
                    errs[name].append(float((o.double() - ref).norm() / ref.norm()))
        return {name: statistics.geometric_mean(e) for name, e in errs.items()}

    props = torch.cuda.get_device_properties(0)
    rows = []
    print(json.dumps({"device": props.name, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                      "flashcheck": fc.lib.fc_version().decode(), "iters": args.iters, "rounds": args.rounds}))
    for d, causal, n in POINTS:
        b, h = sbs.TOKENS // n, sbs.MODEL_DIM // d
        flops = 4 * b * h * n * n * d * (0.5 if causal else 1.0)
        row = {"d": d, "causal": causal, "N": n}
        for dtype in (torch.float16, torch.bfloat16):
            tag = sbs.SHORT_DTYPE[str(dtype).split(".")[1]]
            q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=dtype) for _ in range(3))
            out = (torch.empty_like(q), torch.empty(q.shape[:3], device="cuda", dtype=torch.float32))
            passes = {}
            for _ in range(args.rounds):
                for name in BACKENDS:
                    fn = sbs.runner(fc, name, q, k, v, causal, out)
                    for mode, timer in timers.items():
                        passes.setdefault(f"{tag}_{name}_{mode}", []).append(flops / timer.median_ms(fn) / 1e9)
            row.update({key: round(statistics.median(v), 1) for key, v in passes.items()})
            del q, k, v, out
            if args.accuracy:
                row.update({f"{tag}_{name}_rel_rms": err for name, err in rel_rms(dtype, d, causal, min(n, 2048)).items()})
        print(json.dumps(row), flush=True)
        rows.append(row)
    out_dir = os.environ.get("OUT", "out")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "sync_vs_queued.json"), "w") as f:
        json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
