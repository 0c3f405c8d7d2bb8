"""Sliding windows and softcap: flashcheck beside PyTorch FlexAttention, and beside its own unwindowed kernel.

Throughput in TFLOP/s counted over the (query, key) pairs a row sees: 4 * B * H * d * pairs, so a windowed run
and a full causal run of the same shape are compared per unit of useful work. Windows are causal local
attention, window (W - 1, 0): row i sees keys i - W + 1 .. i (top-left aligned, seqlen_q = seqlen_k).
FlexAttention runs torch.compile'd (dynamic=False: a kernel specialized to each shape), the same window as a mask_mod
(with its block mask), softcap as a score_mod.
Timing as bench/side_by_side.py (median of CUDA-event-timed runs, L2 flushed, interleaved passes). Accuracy:
relative RMS error of O against a float64 reference on the same rounded inputs, for windows, softcap and
sinks (FlexAttention has no sink: its column is empty there).
Prints and writes (to --out: bench/bench_cli.py):
  features.json  every measurement
  features.md    the throughput table and the accuracy table
Usage (--lib defaults to build/gpu/bench/libflashcheck.so, target flashcheck_shared of the gpu preset):
       python3 bench/features_bench.py --out bench/results   # regenerates bench/results/features.{json,md}
       python3 bench/features_bench.py --quick [--out OUT_DIR]
       python3 bench/features_bench.py --only accuracy       # sections: throughput, accuracy
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)
import bench_cli  # noqa: E402
import side_by_side as sbs  # noqa: E402  (the C ABI wrapper and the timer)

torch = sbs.torch
SECTIONS = ("throughput", "accuracy")
TOKENS = 32768  # B * N
MODEL_DIM = 2048  # H * d
SOFTCAP = 30.0


def visible_pairs(n, window):
    """(query, key) pairs of causal attention over n rows, or of the causal window of `window` keys."""
    if window is None or window >= n:
        return n * (n + 1) // 2
    return window * (window + 1) // 2 + (n - window) * window


def flex_runner(q, k, v, window, softcap):
    from torch.nn.attention.flex_attention import create_block_mask
    compiled = sbs.compiled_flex_attention()
    b, h, n, _ = q.shape

    def mask_mod(b_, h_, q_idx, kv_idx):
        causal = q_idx >= kv_idx
        return causal & (q_idx - kv_idx < window) if window is not None else causal

    def score_mod(score, b_, h_, q_idx, kv_idx):
        return softcap * torch.tanh(score / softcap)

    block_mask = create_block_mask(mask_mod, None, None, n, n, device="cuda")
    kwargs = {"block_mask": block_mask}
    if softcap:
        kwargs["score_mod"] = score_mod
    return lambda: compiled(q, k, v, **kwargs)


def throughput(fc, timer, quick, rounds):
    rows = []
    seqlens = [4096, 16384] if quick else [4096, 8192, 16384, 32768]
    windows = [256, 4096] if quick else [256, 1024, 4096]
    for dtype in (torch.bfloat16, torch.float16):
        for d in (64, 128):
            for n in seqlens:
                b, h = max(1, TOKENS // n), MODEL_DIM // d
                q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=dtype) for _ in range(3))
                out = (torch.empty_like(q), torch.empty(q.shape[:3], device="cuda", dtype=torch.float32))
                configs = [(None, 0.0)] + [(w, 0.0) for w in windows if w < n] + [(windows[0], SOFTCAP)]
                for window, softcap in configs:
                    features = {"softcap": softcap}
                    if window is not None:
                        features["window"] = (window - 1, 0)
                    flops = 4 * b * h * d * visible_pairs(n, window)
                    row = {"dtype": str(dtype).split(".")[1], "d": d, "N": n, "B": b, "H": h,
                           "window": window, "softcap": softcap,
                           "flashcheck_kernel": fc.kernel_path(q, k, v, True, out, **features)}
                    calls = {"flashcheck": fc.bound_call(q, k, v, True, out, **features)}
                    try:
                        calls["flex"] = flex_runner(q, k, v, window, softcap)
                        calls["flex"]()
                    except Exception as ex:  # FlexAttention unavailable or failing for this shape
                        row["flex_error"] = str(ex).splitlines()[0][:160]
                        calls.pop("flex", None)
                    passes = {name: [] for name in calls}
                    for _ in range(rounds):
                        for name, call in calls.items():
                            passes[name].append(flops / timer.median_ms(call) / 1e9)
                    for name, tflops in passes.items():
                        row[name] = round(statistics.median(tflops), 1)
                        row[name + "_spread"] = round(max(tflops) / min(tflops), 3)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                del q, k, v, out
                torch.cuda.empty_cache()
    # Windowed against the unwindowed (full causal) kernel of the same dtype, head_dim and N.
    full = {(r["dtype"], r["d"], r["N"]): r["flashcheck"] for r in rows if r["window"] is None and not r["softcap"]}
    for r in rows:
        r["vs_unwindowed"] = round(r["flashcheck"] / full[(r["dtype"], r["d"], r["N"])], 3)
        if r.get("flex"):
            r["vs_flex"] = round(r["flashcheck"] / r["flex"], 3)
    return rows


def reference(q, k, v, window, softcap, sink):
    """float64 attention on the same (rounded) inputs: causal window, softcap, per-head sink logits."""
    q64, k64, v64 = (t.double() for t in (q, k, v))
    n, d = q.shape[2], q.shape[3]
    s = (q64 @ k64.transpose(-1, -2)) / math.sqrt(d)
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(n, device="cuda")[:, None]
    j = torch.arange(n, device="cuda")[None, :]
    keep = j <= i
    if window is not None:
        keep &= i - j < window
    s = s.masked_fill(~keep, -math.inf)
    if sink is not None:
        sink_col = sink.double()[None, :, None, None].expand(s.shape[0], -1, n, 1)
        s = torch.cat([s, sink_col], dim=-1)
        v64 = torch.cat([v64, torch.zeros_like(v64[:, :, :1])], dim=2)
    return torch.softmax(s, dim=-1) @ v64


def accuracy(fc):
    rows = []
    torch.manual_seed(0)
    b, h, n = 2, 4, 2048
    for dtype in (torch.bfloat16, torch.float16):
        for d in (64, 128):
            q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=dtype) for _ in range(3))
            sink = torch.randn(h, device="cuda", dtype=torch.float32) * 3
            for window, softcap, use_sink in [(256, 0.0, False), (1024, 0.0, False), (None, SOFTCAP, False),
                                              (256, SOFTCAP, False), (None, 0.0, True), (256, 0.0, True)]:
                want = reference(q, k, v, window, softcap, sink if use_sink else None)
                features = {"softcap": softcap, "sink": sink if use_sink else None}
                if window is not None:
                    features["window"] = (window - 1, 0)
                got = fc.forward(q, k, v, True, **features).double()
                rel = lambda o: (torch.linalg.norm(o.double() - want) / torch.linalg.norm(want)).item()
                row = {"dtype": str(dtype).split(".")[1], "d": d, "N": n, "window": window, "softcap": softcap,
                       "sink": use_sink, "flashcheck": float(f"{rel(got):.3g}")}
                if not use_sink:
                    try:
                        row["flex"] = float(f"{rel(flex_runner(q, k, v, window, softcap)()):.3g}")
                    except Exception as ex:
                        row["flex_error"] = str(ex).splitlines()[0][:160]
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def markdown(meta, tp, acc):
    out = [f"Device: {meta['device']}, PyTorch {meta['torch']}, flashcheck {meta['flashcheck']}.", "",
           bench_cli.describe(meta), "",
           "Throughput in TFLOP/s over visible (query, key) pairs (4·B·H·d·pairs); causal, B·N = 32768, H·d = 2048; "
           "window W: row i sees keys i−W+1..i; softcap " + f"{SOFTCAP:g}" + " as a score_mod for FlexAttention.", "",
           "| dtype | d | N | window | softcap | flashcheck | FlexAttention | ÷ Flex | ÷ unwindowed |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in tp:
        out.append(f"| {r['dtype']} | {r['d']} | {r['N']} | {r['window'] or 'none'} | {r['softcap'] or ''} | "
                   f"{r['flashcheck']} | {r.get('flex', '')} | {r.get('vs_flex', '')} | {r['vs_unwindowed']} |")
    out += ["", "Accuracy: relative RMS error of O against a float64 reference on the same rounded inputs; "
            "B = 2, H = 4, N = 2048, randn inputs, sinks randn·3.", "",
            "| dtype | d | window | softcap | sink | flashcheck | FlexAttention |", "|---|---|---|---|---|---|---|"]
    for r in acc:
        out.append(f"| {r['dtype']} | {r['d']} | {r['window'] or 'none'} | {r['softcap'] or ''} | "
                   f"{'yes' if r['sink'] else ''} | {r['flashcheck']} | {r.get('flex', '')} |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=sbs.DEFAULT_LIB, help="path to libflashcheck.so (target flashcheck_shared)")
    ap.add_argument("--quick", action="store_true", help="two sequence lengths and two windows (a smoke run)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved passes over the backends per point")
    bench_cli.add_arguments(ap, SECTIONS)
    args = ap.parse_args()
    chosen, out = bench_cli.resolve(ap, args, SECTIONS, partial=args.quick)
    if torch is None:
        ap.error("needs PyTorch with CUDA (import torch failed)")
    start = time.time()
    fc = sbs.Flashcheck(args.lib)
    timer = sbs.Timer(args.warmup, args.iters, queued=args.timing == "queued")
    tp = throughput(fc, timer, args.quick, args.rounds) if "throughput" in chosen else []
    acc = accuracy(fc) if "accuracy" in chosen else []
    meta = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "flashcheck": fc.lib.fc_version().decode(), **bench_cli.meta(args, chosen)}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "features.json"), "w") as f:
        json.dump({"meta": meta, "throughput": tp, "accuracy": acc}, f, indent=1)
    md = markdown(meta, tp, acc)
    with open(os.path.join(out, "features.md"), "w") as f:
        f.write(md)
    print(md)
    print(f"features_bench: {time.time() - start:.1f} s")

if __name__ == "__main__":
    main()
