"""The backward pass beside PyTorch's SDPA backends: FlashAttention-2 (flash), cuDNN and the memory-efficient kernel,
each through autograd on the same tensors, over the grid of flashcheck_bench --pass backward (fp16 and bf16,
d = 64/128/256, causal and not, B*N = 16384, H*d = 2048; --grid quick: N = 1k and 4k, paper: N = 512-16k).

Per point: q, k, v of shape [B, H, N, d] (normal, requires_grad), O = scaled_dot_product_attention(q, k, v,
is_causal) under one backend, dO normal; timed is torch.autograd.grad(O, (q, k, v), dO) alone (the forward's graph is
kept), bench/side_by_side.py's Timer (warm-up, then the median of CUDA-event-timed runs with L2 flushed before each;
--timing sync or queued). FLOPs = 2.5 x 4 B H N^2 d, halved for causal: flashcheck_bench's count. PyTorch's is_causal
is top-left aligned (flashcheck's causal-tl). --only runs a subset of the backends (sections: flash, cudnn,
efficient).

With --flashcheck FILE (flashcheck_bench's JSON of the same grid) it also writes backward_vs_peers.md: flashcheck's
TFLOP/s beside each backend's and the ratio to the faster of flash and cuDNN.
Writes to --out (bench/bench_cli.py): peers_backward.json, and backward_vs_peers.md with --flashcheck.
Usage: python3 bench/peers_backward.py --grid quick --flashcheck bench/results/backward.json --out bench/results
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_cli  # noqa: E402
import side_by_side as sbs  # noqa: E402  (the timer)

torch = sbs.torch
if torch is not None:
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

TOKENS = 16384
MODEL_DIM = 2048
BACKENDS = {"flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION", "efficient": "EFFICIENT_ATTENTION"}
SECTIONS = tuple(BACKENDS)


def grid(kind):
    seqlens = (1024, 4096) if kind == "quick" else (512, 1024, 2048, 4096, 8192, 16384)
    for dtype in ("bf16", "f16"):
        for d in (64, 128, 256):
            for causal in (False, True):
                for n in seqlens:
                    yield dtype, d, n, TOKENS // n, MODEL_DIM // d, causal


def time_backward(backend, dtype, d, n, b, h, causal, timer):
    torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float16
    gen = torch.Generator(device="cuda").manual_seed(1)
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch_dtype, generator=gen).requires_grad_() for _ in range(3))
    d_o = torch.randn(b, h, n, d, device="cuda", dtype=torch_dtype, generator=gen)
    try:
        with sdpa_kernel(getattr(SDPBackend, BACKENDS[backend])):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            ms = timer.median_ms(lambda: torch.autograd.grad(out, (q, k, v), d_o, retain_graph=True))
    except RuntimeError as e:  # the backend refuses the shape (or runs out of memory): no number
        return None, str(e).splitlines()[0][:120]
    finally:
        torch.cuda.empty_cache()
    return ms, ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grid", choices=("quick", "paper"), default="quick")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--flashcheck", help="flashcheck_bench --pass backward JSON of the same grid")
    bench_cli.add_arguments(ap, SECTIONS)
    args = ap.parse_args()
    chosen, out = bench_cli.resolve(ap, args, SECTIONS)
    if torch is None or not torch.cuda.is_available():
        ap.error("needs PyTorch with a CUDA device")
    timer = sbs.Timer(args.warmup, args.iters, queued=args.timing == "queued")
    rows = []
    for dtype, d, n, b, h, causal in grid(args.grid):
        flops = 2.5 * 4.0 * b * h * n * n * d * (0.5 if causal else 1.0)
        row = {"dtype": dtype, "head_dim": d, "seqlen": n, "batch": b, "heads": h,
               "mask": "causal-tl" if causal else "none"}
        for backend in chosen:
            ms, why = time_backward(backend, dtype, d, n, b, h, causal, timer)
            row[backend] = {"ms": ms, "tflops": flops / (ms * 1e9) if ms else None, "error": why}
        rows.append(row)
        print(f"{dtype:4} d={d:3} N={n:5} B={b:3} H={h:2} {row['mask']:9} " +
              "  ".join(f"{k} {row[k]['tflops']:6.1f}" if row[k]["tflops"] else f"{k}   -   " for k in chosen),
              flush=True)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "peers_backward.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "cudnn": torch.backends.cudnn.version(), "grid": args.grid, "meta": bench_cli.meta(args, chosen),
                   "warmup": args.warmup, "iters": args.iters, "results": rows}, f, indent=1)
    if not args.flashcheck:
        return
    with open(args.flashcheck) as f:
        ours = {(r["dtype"], r["head_dim"], r["seqlen"], r["batch"], r["heads"], r["mask"]): r
                for r in json.load(f)["results"]}
    tflops = lambda row, k: (row.get(k) or {}).get("tflops")
    lines = [bench_cli.describe(bench_cli.meta(args, chosen)), "",
             "| dtype | d | N | mask | flashcheck TFLOP/s | path | flash (FA2) | cuDNN | efficient | vs best of flash, cuDNN |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        mine = ours.get((row["dtype"], row["head_dim"], row["seqlen"], row["batch"], row["heads"], row["mask"]))
        if mine is None:
            continue
        peers = [tflops(row, k) for k in ("flash", "cudnn") if tflops(row, k)]
        ratio = f"{mine['tflops'] / max(peers):.2f}x" if peers and mine["tflops"] else "-"
        cell = lambda k: f"{tflops(row, k):.1f}" if tflops(row, k) else "-"
        lines.append(f"| {row['dtype']} | {row['head_dim']} | {row['seqlen']} | {row['mask']} | {mine['tflops']:.1f} | "
                     f"{mine['path']} | {cell('flash')} | {cell('cudnn')} | {cell('efficient')} | {ratio} |")
    with open(os.path.join(out, "backward_vs_peers.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
