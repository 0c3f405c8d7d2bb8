"""The inference path: decoding against a KV cache, and a variable-length prefill batch.

Decode: one query row per sequence, bf16, d = 128, heads_q / heads_kv = 32/8 and 64/8, batch 1..64, cache 1k..128k
keys per sequence (batch * cache up to 2M tokens), the cache contiguous or paged (page size 16 and 256, pages in a
shuffled order). Achieved HBM bandwidth = K/V bytes read (batch * cache * heads_kv * d * 2 tensors * 2 bytes) / time,
against the device's roofline: 2 (double data rate) x memory clock x bus width, read from the CUDA runtime's device
attributes (--roofline TBPS gives it instead). flashcheck runs with num_splits = 0 (its heuristic) through
fc_forward_prechecked (index arrays validated once with fc_can_implement, as a serving loop does). Beside it, PyTorch SDPA on the
contiguous cache (enable_gqa: every backend that takes it), and FlexAttention (torch.compile'd per shape, enable_gqa)
at the points of batch * cache >= 256k tokens.

Varlen prefill: one packed batch of mixed lengths (1 .. 16k tokens, causal) against the same number of tokens as one
dense batch of equal-length sequences; TFLOP/s over the causal (query, key) pairs of each.
Timing as bench/side_by_side.py (median of CUDA-event-timed runs, L2 flushed, interleaved passes; --timing).
Prints and writes (to --out: bench/bench_cli.py) decode.json (every measurement) and decode.md (the tables).
Usage (--lib defaults to build/gpu/bench/libflashcheck.so, target flashcheck_shared of the gpu preset):
       python3 bench/decode_bench.py --out bench/results   # regenerates bench/results/decode.{json,md}
       python3 bench/decode_bench.py --quick               # both head ratios, batch 1/4/16/64, cache 4k/16k/64k
       python3 bench/decode_bench.py --only decode         # the decode grid without the varlen prefill
       python3 bench/decode_bench.py --flashcheck-only     # flashcheck's layouts alone (A/B rounds)
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import sys

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)
import bench_cli  # noqa: E402
import side_by_side as sbs  # noqa: E402  (the C ABI wrapper and the timer)

torch = sbs.torch
SECTIONS = ("decode", "varlen")
CUDA_DEV_ATTR_MEMORY_CLOCK_RATE = 36  # kHz (cudaDevAttrMemoryClockRate)
CUDA_DEV_ATTR_GLOBAL_MEMORY_BUS_WIDTH = 37  # bits (cudaDevAttrGlobalMemoryBusWidth)
HEAD_DIM = 128
MAX_TOKENS = 2 * 1024 * 1024
FC_MASK_CAUSAL_BOTTOM_RIGHT = 1
TARGET_TOKENS = 256 * 1024
VARLEN_LENGTHS = [1, 16384, 7, 2048, 513, 100, 4096, 1, 8192, 31, 1000, 3000, 64, 16384, 255, 12000]


def fc_decode_call(fc, q, k_cache, v_cache, o, lse, cache_len, page_size, seed):
    """fc_forward_prechecked on a decoding step: q [B, 1, Hq, d]; the cache [B, N, Hkv, d] contiguous
    (page_size 0) or re-laid as shuffled pages [P, page_size, Hkv, d] with a page table."""
    b, _, hq, d = q.shape
    hkv = k_cache.shape[2]
    keep = {}
    if page_size:
        pages_per_seq = (cache_len + page_size - 1) // page_size
        num_pages = b * pages_per_seq
        gen = torch.Generator().manual_seed(seed)
        order = torch.randperm(num_pages, generator=gen).to(torch.int32)
        table = order.view(b, pages_per_seq).cuda()
        padded = pages_per_seq * page_size
        k_pages = torch.empty(num_pages, page_size, hkv, d, dtype=q.dtype, device="cuda")
        v_pages = torch.empty_like(k_pages)
        src_k = torch.nn.functional.pad(k_cache, (0, 0, 0, 0, 0, padded - cache_len)).view(num_pages, page_size, hkv, d)
        src_v = torch.nn.functional.pad(v_cache, (0, 0, 0, 0, 0, padded - cache_len)).view(num_pages, page_size, hkv, d)
        k_pages[order.long().cuda()] = src_k
        v_pages[order.long().cuda()] = src_v
        k, v = k_pages, v_pages
        keep.update(table=table, k=k, v=v)
    else:
        k, v = k_cache, v_cache
    used = torch.full((b,), cache_len, dtype=torch.int32, device="cuda")
    keep["used"] = used
    p = sbs.FcParams()
    p.dtype, p.mask = sbs.FC_DTYPE[str(q.dtype).split(".")[1]], sbs.FC_MASK_NONE
    p.batch, p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_k, p.head_dim = b, hq, hkv, 1, cache_len, d
    p.q, p.k, p.v, p.o, p.lse = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr()
    p.q_stride = sbs.FcStrides(q.stride(0), q.stride(2), q.stride(1))
    p.o_stride = sbs.FcStrides(o.stride(0), o.stride(2), o.stride(1))
    kv = sbs.FcStrides(k.stride(0), k.stride(2), k.stride(1))
    p.k_stride, p.v_stride = kv, kv
    p.softmax_scale = 1.0 / math.sqrt(d)
    p.window_left = p.window_right = -1
    p.seqused_k = used.data_ptr()
    if page_size:
        p.page_table, p.page_size = keep["table"].data_ptr(), page_size
        p.num_pages, p.max_pages_per_seq = k.shape[0], keep["table"].shape[1]
    p.num_splits = 0
    msg = ctypes.create_string_buffer(512)
    if fc.lib.fc_can_implement(ctypes.byref(p), msg, len(msg)) != 0:
        raise RuntimeError(f"fc_can_implement: {msg.value.decode()}")
    forward = fc.lib.fc_forward_prechecked
    forward.argtypes = [ctypes.POINTER(sbs.FcParams), ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    p_ref, stream = ctypes.byref(p), ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def call():
        if forward(p_ref, stream, msg, len(msg)) != 0:
            raise RuntimeError(f"fc_forward_prechecked: {msg.value.decode()}")
    call.keep = (p, keep)
    return call


def sdpa_decode_call(backend, q, k_cache, v_cache):
    """SDPA on the contiguous cache, [B, H, N, d] views, GQA through enable_gqa."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    qt, kt, vt = q.transpose(1, 2), k_cache.transpose(1, 2), v_cache.transpose(1, 2)
    member = [getattr(SDPBackend, sbs.BACKENDS[backend])]

    def call():
        with sdpa_kernel(member):
            torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)
    return call


def flex_decode_call(q, k_cache, v_cache):
    compiled = sbs.compiled_flex_attention()
    qt, kt, vt = q.transpose(1, 2), k_cache.transpose(1, 2), v_cache.transpose(1, 2)

    def call():
        compiled(qt, kt, vt, enable_gqa=True)
    return call


def decode(fc, timer, quick, rounds, peers=True):
    rows = []
    heads = [(32, 8), (64, 8)]
    batches = [1, 4, 16, 64]
    caches = [1024, 4096, 16384, 65536, 131072]
    pages = [0, 16, 256]
    if quick:
        batches, caches = [1, 4, 16, 64], [4096, 16384, 65536]
    torch.manual_seed(0)
    for hq, hkv in heads:
        for b in batches:
            for n in caches:
                if b * n > MAX_TOKENS:
                    continue
                q = torch.randn(b, 1, hq, HEAD_DIM, dtype=torch.bfloat16, device="cuda")
                k = torch.randn(b, n, hkv, HEAD_DIM, dtype=torch.bfloat16, device="cuda")
                v = torch.randn_like(k)
                o = torch.empty_like(q)
                lse = torch.empty(b, hq, 1, dtype=torch.float32, device="cuda")
                calls = {f"flashcheck page={pg}" if pg else "flashcheck contiguous": fc_decode_call(fc, q, k, v, o, lse, n, pg, b * n)
                         for pg in pages}
                for backend in ("flash", "cudnn", "efficient") if peers else ():
                    call = sdpa_decode_call(backend, q, k, v)
                    try:
                        call()
                        torch.cuda.synchronize()
                        calls[f"sdpa {backend}"] = call
                    except RuntimeError:
                        torch.cuda.synchronize()
                errors = {}
                if b * n >= TARGET_TOKENS and not quick and peers:
                    try:
                        call = flex_decode_call(q, k, v)
                        call()
                        torch.cuda.synchronize()
                        calls["flex"] = call
                    except Exception as e:  # noqa: BLE001 (the compile's errors are many kinds)
                        errors["flex"] = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:120]}"
                        print(f"  flex: {errors['flex']}", file=sys.stderr)
                passes = {name: [] for name in calls}
                for _ in range(rounds):
                    for name, call in calls.items():
                        passes[name].append(timer.median_ms(call))
                kv_bytes = b * n * hkv * HEAD_DIM * 2 * 2
                row = {"heads_q": hq, "heads_kv": hkv, "batch": b, "cache": n, "kv_bytes": kv_bytes, "ms": {}, "tbps": {}}
                if errors:
                    row["errors"] = errors  # a peer that failed here: its cell reads "failed"
                for name, times in passes.items():
                    ms = statistics.median(times)
                    row["ms"][name] = ms
                    row["tbps"][name] = kv_bytes / (ms * 1e-3) / 1e12
                rows.append(row)
                best_peer = max((v for k_, v in row["tbps"].items() if not k_.startswith("flashcheck")), default=0)
                print(f"decode hq={hq} hkv={hkv} b={b} n={n}: " +
                      " ".join(f"{k_}={v:.2f}" for k_, v in row["tbps"].items()) + f" TB/s (best peer {best_peer:.2f})",
                      flush=True)
                del q, k, v, o, lse, calls
                torch.cuda.empty_cache()
    return rows


def varlen(fc, timer, rounds, quick):
    """The mixed batch packed (cu_seqlens) against the same tokens as a dense batch of equal-length sequences."""
    lengths = VARLEN_LENGTHS[:8] if quick else VARLEN_LENGTHS
    total = sum(lengths)
    h, d = 16, 128
    dense_len = 2048
    dense_b = max(1, total // dense_len)
    out = []
    for dtype in (torch.bfloat16,):
        q = torch.randn(total, h, d, dtype=dtype, device="cuda")
        k, v = torch.randn_like(q), torch.randn_like(q)
        o = torch.empty_like(q)
        lse = torch.empty(h, total, dtype=torch.float32, device="cuda")
        cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32, device="cuda")
        p = sbs.FcParams()
        p.dtype, p.mask = sbs.FC_DTYPE[str(dtype).split(".")[1]], FC_MASK_CAUSAL_BOTTOM_RIGHT
        p.batch, p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_k, p.head_dim = len(lengths), h, h, max(lengths), max(lengths), d
        p.q, p.k, p.v, p.o, p.lse = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr()
        st = sbs.FcStrides(0, q.stride(1), q.stride(0))
        p.q_stride = p.k_stride = p.v_stride = p.o_stride = st
        p.softmax_scale = 1.0 / math.sqrt(d)
        p.window_left = p.window_right = -1
        p.cu_seqlens_q = p.cu_seqlens_k = cu.data_ptr()
        p.total_q = p.total_k = total
        p.num_splits = 1
        msg = ctypes.create_string_buffer(512)
        if fc.lib.fc_can_implement(ctypes.byref(p), msg, len(msg)) != 0:
            raise RuntimeError(msg.value.decode())
        fwd = fc.lib.fc_forward_prechecked
        fwd.argtypes = [ctypes.POINTER(sbs.FcParams), ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

        def packed_call():
            if fwd(ctypes.byref(p), stream, msg, len(msg)) != 0:
                raise RuntimeError(msg.value.decode())
        path = ctypes.c_int32()
        bm, bn = ctypes.c_int32(), ctypes.c_int32()
        fc.lib.fc_select_config(ctypes.byref(p), ctypes.byref(path), ctypes.byref(bm), ctypes.byref(bn), msg, len(msg))
        packed_kernel = f"{sbs.FC_PATHS.get(path.value, '?')} {bm.value}x{bn.value}"
        dq = torch.randn(dense_b, h, dense_len, d, dtype=dtype, device="cuda")
        dk, dv = torch.randn_like(dq), torch.randn_like(dq)
        dout = (torch.empty_like(dq), torch.empty(dense_b, h, dense_len, dtype=torch.float32, device="cuda"))
        dense_call = fc.bound_call(dq, dk, dv, True, dout)
        times = {"packed": [], "dense": []}
        for _ in range(rounds):
            times["packed"].append(timer.median_ms(packed_call))
            times["dense"].append(timer.median_ms(dense_call))
        packed_flops = sum(4 * h * d * n * (n + 1) / 2 for n in lengths)
        dense_flops = dense_b * 4 * h * d * dense_len * (dense_len + 1) / 2
        row = {"dtype": str(dtype).split(".")[1], "lengths": lengths, "tokens": total, "dense_batch": dense_b,
               "dense_len": dense_len, "packed_kernel": packed_kernel,
               "packed_ms": statistics.median(times["packed"]), "dense_ms": statistics.median(times["dense"])}
        row["packed_tflops"] = packed_flops / (row["packed_ms"] * 1e-3) / 1e12
        row["dense_tflops"] = dense_flops / (row["dense_ms"] * 1e-3) / 1e12
        row["ratio"] = row["packed_tflops"] / row["dense_tflops"]
        print(f"varlen {row['dtype']}: packed {row['packed_tflops']:.1f} TFLOP/s ({packed_kernel}), dense "
              f"{row['dense_tflops']:.1f}, ratio {row['ratio']:.3f}", flush=True)
        out.append(row)
    return out


def hbm_roofline():
    """The device's peak DRAM bandwidth in TB/s, 2 x memory clock x bus width from the CUDA runtime's device attributes
    (the runtime PyTorch loaded), and how it was read; (None, why) where it cannot be read."""
    for soname in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
        try:
            runtime = ctypes.CDLL(soname)
            break
        except OSError:
            continue
    else:
        return None, "no CUDA runtime library (libcudart.so) to read the memory clock from"
    clock_khz, bus_bits = ctypes.c_int(), ctypes.c_int()
    device = torch.cuda.current_device()
    if (runtime.cudaDeviceGetAttribute(ctypes.byref(clock_khz), CUDA_DEV_ATTR_MEMORY_CLOCK_RATE, device) != 0 or
            runtime.cudaDeviceGetAttribute(ctypes.byref(bus_bits), CUDA_DEV_ATTR_GLOBAL_MEMORY_BUS_WIDTH, device) != 0 or
            clock_khz.value <= 0 or bus_bits.value <= 0):
        return None, "the CUDA runtime did not report the memory clock and bus width"
    tbps = 2.0 * clock_khz.value * 1e3 * bus_bits.value / 8 / 1e12
    return tbps, f"2 x {clock_khz.value / 1e3:.0f} MHz x {bus_bits.value} bits (CUDA device attributes)"


def write_markdown(path, device, decode_rows, varlen_rows, meta):
    names = []
    for r in decode_rows:
        for n in [*r["tbps"], *r.get("errors", {})]:
            if n not in names:
                names.append(n)
    roofline = meta["roofline_tbps"]
    lines = [f"Device: {device}.", "", bench_cli.describe(meta), "",
             f"Decode: bf16, d = {HEAD_DIM}, one query row per sequence; achieved HBM bandwidth in TB/s (K/V bytes read / "
             f"time; roofline {roofline:.2f} TB/s, {meta['roofline_source']}) and, for flashcheck, its best layout's "
             "share of the roofline.", "",
             "| heads_q/kv | batch | cache | " + " | ".join(names) + " | flashcheck % roofline |",
             "|---|---|---|" + "---|" * len(names) + "---|"]
    for r in decode_rows:
        fc_best = max(v for k_, v in r["tbps"].items() if k_.startswith("flashcheck"))
        cells = [f"{r['tbps'][n]:.2f}" if n in r["tbps"] else "failed" if n in r.get("errors", {}) else ""
                 for n in names]
        lines.append(f"| {r['heads_q']}/{r['heads_kv']} | {r['batch']} | {r['cache']} | " + " | ".join(cells) +
                     f" | {100 * fc_best / roofline:.0f}% |")
    lines += ["", "Varlen prefill: causal, heads 16, d 128; TFLOP/s over the causal pairs.", "",
              "| dtype | lengths | tokens | packed TFLOP/s | packed kernel | dense batch | dense TFLOP/s | ratio |",
              "|---|---|---|---|---|---|---|---|"]
    for r in varlen_rows:
        lines.append(f"| {r['dtype']} | {len(r['lengths'])} sequences, 1..{max(r['lengths'])} | {r['tokens']} | "
                     f"{r['packed_tflops']:.1f} | {r['packed_kernel']} | {r['dense_batch']} x {r['dense_len']} | "
                     f"{r['dense_tflops']:.1f} | {r['ratio']:.3f} |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=sbs.DEFAULT_LIB, help="path to libflashcheck.so (target flashcheck_shared)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--flashcheck-only", action="store_true", help="no peers (SDPA, FlexAttention) beside flashcheck")
    ap.add_argument("--roofline", type=float, metavar="TBPS",
                    help="the HBM roofline in TB/s (default: read from the device)")
    bench_cli.add_arguments(ap, SECTIONS)
    args = ap.parse_args()
    chosen, out = bench_cli.resolve(ap, args, SECTIONS, partial=args.quick or args.flashcheck_only)
    if args.roofline is not None and not args.roofline > 0:
        ap.error(f"--roofline: {args.roofline} is not a bandwidth (TB/s above 0)")
    if torch is None:
        ap.error("needs PyTorch with CUDA (import torch failed)")
    meta = bench_cli.meta(args, chosen)
    if args.roofline is not None:
        meta["roofline_tbps"], meta["roofline_source"] = args.roofline, "given (--roofline)"
    else:
        meta["roofline_tbps"], meta["roofline_source"] = hbm_roofline()
        if meta["roofline_tbps"] is None:
            ap.error(f"--roofline: {meta['roofline_source']}; give the device's HBM bandwidth in TB/s")
    fc = sbs.Flashcheck(args.lib)
    timer = sbs.Timer(3, args.iters, queued=args.timing == "queued")
    decode_rows = decode(fc, timer, args.quick, args.rounds, not args.flashcheck_only) if "decode" in chosen else []
    varlen_rows = varlen(fc, timer, args.rounds, args.quick) if "varlen" in chosen else []
    props = torch.cuda.get_device_properties(0)
    device = f"{props.name}, PyTorch {torch.__version__}, {fc.lib.fc_version().decode()}"
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "decode.json"), "w") as f:
        json.dump({"device": device, "meta": meta, "decode": decode_rows, "varlen": varlen_rows}, f, indent=1)
    write_markdown(os.path.join(out, "decode.md"), device, decode_rows, varlen_rows, meta)


if __name__ == "__main__":
    main()
