"""flashcheck beside PyTorch's SDPA backends (flash, cudnn, efficient, math) and, where the fa3-fwd wheel imports,
FlashAttention-3 (bf16; on [B, N, H, d] copies of the same tensors) in one run.

flashcheck is called through its C ABI (kernel/include/flashcheck/attention_c.h) loaded with ctypes from
libflashcheck.so, on PyTorch's current stream. Prints and writes (to --out, default out/bench; bench/results, the
committed result set that bench/README.md shows, when named: bench/bench_cli.py):
  side_by_side.json  every measurement
  side_by_side.md    one table of TFLOP/s, one of the heads sweep (bf16, d = 128, N = 4096, B = 1, H = 1..32),
                     one of unequal head dims (d for Q and K, dv for V and O: (192, 128) beside (192, 192) over
                     N = 1k-16k, and (128, 64), (64, 128), (256, 128) at N = 4096; bf16, H = 16), one of accuracy (relative RMS error of O against float64 SDPA on the same rounded inputs),
                     one of peak memory, one of fp8 (e4m3 inputs, O in bf16: TFLOP/s beside FlashAttention-3's fp8
                     and flashcheck's bf16 on the same values, and the relative RMS error of O against float64 on the
                     dequantised inputs, beside FlashAttention-3's published 2.4e-2)
  tflops_bf16.png, tflops_fp16.png, tflops_fp32.png   TFLOP/s vs seq_len per head_dim, causal and not
  heads.png          TFLOP/s vs heads (the heads sweep), causal and not
  memory.png         peak device memory vs seq_len, flashcheck beside standard attention (math backend)
Timing: warm-up, then the median of CUDA-event-timed runs, L2 flushed before each, in --rounds interleaved
passes over the backends (the median pass reported, the spread kept in the JSON). --timing sync (default) times
each run alone, so a backend's host cost beyond the flush counts; --timing queued queues the runs ahead of the GPU
and counts GPU time only (Timer). FLOPs = 4 B H N^2 d (2 B H N^2 (d + dv) with unequal head dims),
halved for causal. Grid: B*N = 16384 tokens, H*d = 2048 (the FlashAttention paper's), as in
/work/shared/peers/sdpa_peers.py. PyTorch's is_causal is top-left aligned, so flashcheck runs
FC_MASK_CAUSAL_TOP_LEFT (identical to bottom-right here, since seqlen_q == seqlen_k).
Usage (--lib defaults to build/gpu/bench/libflashcheck.so, target flashcheck_shared of the gpu preset):
       python3 bench/side_by_side.py --rounds 5 --iters 20 --out bench/results   # regenerates bench/results
       python3 bench/side_by_side.py --accuracy-seeds 30 --out bench/results     # adds accuracy_seeds.{json,md}
       python3 bench/side_by_side.py --lib LIB [--out OUT_DIR] [--quick] [--only heads,memory]
The second form runs only the accuracy configurations, once per seed 0..N-1, and writes accuracy_seeds.json and
accuracy_seeds.md: per configuration, flashcheck's relative RMS error over each peer's on the same inputs
(geometric mean, range, and for how many seeds flashcheck's error is the lower one). One seed's difference
between two kernels that round the same way can be either sign; this says whether it keeps its sign.
"""
import argparse
import statistics
import ctypes
import json
import math
import os
import sys
import time
import warnings

import bench_cli

try:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:  # --help needs no PyTorch; main() stops with the reason
    torch = None

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
DEFAULT_LIB = os.path.join(os.path.dirname(BENCH_DIR), "build", "gpu", "bench", "libflashcheck.so")

TOKENS = 16384  # B * N
MODEL_DIM = 2048  # H * d
HEADS_SWEEP = (1, 2, 4, 8, 16, 32)  # the heads sweep (bf16, d = 128, N = 4096, B = 1)
HEADS_QUICK = (1, 32)
BACKENDS = {"flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
            "math": "MATH"}  # column -> SDPBackend member
COLUMNS = ["flashcheck"] + list(BACKENDS)  # and "fa3" after flashcheck where the fa3-fwd wheel imports (main)
FA3 = None  # (flash_attn_func, version) of the fa3-fwd wheel, or None
SECTIONS = ("throughput", "heads", "value_dims", "accuracy", "memory", "fp8")
MATH_MAX_SEQLEN = 4096  # the unfused backend's N^2 scores make longer sequences slow (as in the peer run)
FC_DTYPE = {"float32": 0, "float16": 1, "bfloat16": 2, "float8_e4m3fn": 3}
FC_MASK_NONE, FC_MASK_CAUSAL_TOP_LEFT, FC_MASK_WINDOW_TOP_LEFT = 0, 2, 4
FC_PATHS = {0: "general-fp32", 1: "tensor-core", 2: "split-tf32", 3: "tensor-core-fp8"}
SHORT_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


class FcStrides(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int64), ("head", ctypes.c_int64), ("row", ctypes.c_int64)]


class FcParams(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int32), ("mask", ctypes.c_int32),
                ("batch", ctypes.c_int64), ("heads_q", ctypes.c_int64), ("heads_kv", ctypes.c_int64),
                ("seqlen_q", ctypes.c_int64), ("seqlen_k", ctypes.c_int64), ("head_dim", ctypes.c_int64),
                ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p), ("o", ctypes.c_void_p),
                ("lse", ctypes.c_void_p),
                ("q_stride", FcStrides), ("k_stride", FcStrides), ("v_stride", FcStrides), ("o_stride", FcStrides),
                ("softmax_scale", ctypes.c_float),
                ("window_left", ctypes.c_int64), ("window_right", ctypes.c_int64),
                ("softcap", ctypes.c_float), ("sink", ctypes.c_void_p),
                ("cu_seqlens_q", ctypes.c_void_p), ("total_q", ctypes.c_int64),
                ("cu_seqlens_k", ctypes.c_void_p), ("total_k", ctypes.c_int64),
                ("seqused_k", ctypes.c_void_p), ("page_table", ctypes.c_void_p),
                ("page_size", ctypes.c_int64), ("num_pages", ctypes.c_int64), ("max_pages_per_seq", ctypes.c_int64),
                ("num_splits", ctypes.c_int32),
                ("head_dim_v", ctypes.c_int64),  # 0: V and O have head_dim columns
                # Dropout, off (ctypes zero-fills): the C struct reads them, so the mirror must hold them.
                ("dropout_p", ctypes.c_float), ("dropout_seed", ctypes.c_uint64), ("dropout_offset", ctypes.c_uint64),
                ("dropout_mask_out", ctypes.c_void_p),
                # fp8 descales, null (ctypes zero-fills): read by the C struct as the dropout fields are.
                ("descale_q", ctypes.c_void_p), ("descale_k", ctypes.c_void_p), ("descale_v", ctypes.c_void_p)]


class Flashcheck:
    """flashcheck through attention_c.h: forward(q, k, v, causal) on [B, H, N, d] tensors, like SDPA. num_splits 0
    leaves split-KV to flashcheck's heuristic (runs only where a launch has fewer Q tiles than the GPU has SMs)."""

    def __init__(self, path, num_splits=0):
        self.lib = ctypes.CDLL(path)
        self.num_splits = num_splits
        msg_args = [ctypes.c_char_p, ctypes.c_size_t]
        self.lib.fc_forward.argtypes = [ctypes.POINTER(FcParams), ctypes.c_void_p] + msg_args
        self.lib.fc_forward.restype = ctypes.c_int32
        self.lib.fc_select_config.argtypes = [ctypes.POINTER(FcParams)] + [ctypes.POINTER(ctypes.c_int32)] * 3 + msg_args
        self.lib.fc_select_config.restype = ctypes.c_int32
        self.lib.fc_effective_splits.argtypes = [ctypes.POINTER(FcParams), ctypes.POINTER(ctypes.c_int32)] + msg_args
        self.lib.fc_effective_splits.restype = ctypes.c_int32
        self.lib.fc_version.restype = ctypes.c_char_p
        self.msg = ctypes.create_string_buffer(512)

    def params(self, q, k, v, o, lse, causal, window=None, softcap=0.0, sink=None):
        """FcParams for [B, H, N, d] tensors: causal (top-left), or with window = (left, right) the top-left
        window mask; softcap (0: off) and sink (a float32 [H] tensor, or None) as attention_c.h defines them."""
        def strides(t):
            assert t.stride(3) == 1, "flashcheck needs a unit-stride head_dim axis"
            return FcStrides(t.stride(0), t.stride(1), t.stride(2))
        b, h, n, d = q.shape
        mask = FC_MASK_WINDOW_TOP_LEFT if window else (FC_MASK_CAUSAL_TOP_LEFT if causal else FC_MASK_NONE)
        left, right = window if window else (-1, -1)
        dv = v.shape[3]
        return FcParams(FC_DTYPE[str(q.dtype).split(".")[1]], mask,
                        b, h, k.shape[1], n, k.shape[2], d,
                        q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(),
                        strides(q), strides(k), strides(v), strides(o), 1.0 / math.sqrt(d),
                        left, right, softcap, sink.data_ptr() if sink is not None else None,
                        num_splits=self.num_splits, head_dim_v=dv if dv != d else 0)

    def forward(self, q, k, v, causal=False, out=None, **features):
        o = torch.empty(*q.shape[:3], v.shape[3], device=q.device, dtype=q.dtype) if out is None else out[0]
        lse = torch.empty(q.shape[:3], device=q.device, dtype=torch.float32) if out is None else out[1]
        self.bound_call(q, k, v, causal, (o, lse), **features)()
        return o

    def bound_call(self, q, k, v, causal, out, **features):
        """fc_forward with its FcParams built once: what a C or C++ caller that keeps its Params pays per call
        (one ctypes call), so the timed region holds the kernel, not Python building argument structs.
        features: window, softcap, sink (params())."""
        p = self.params(q, k, v, out[0], out[1], causal, **features)
        p_ref = ctypes.byref(p)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        msg, msg_len, forward = self.msg, len(self.msg), self.lib.fc_forward

        def call():
            if forward(p_ref, stream, msg, msg_len) != 0:
                raise RuntimeError(f"fc_forward: {msg.value.decode()}")
        call.params = p  # keeps the struct alive as long as the call
        return call

    def kernel_path(self, q, k, v, causal, out, **features):
        """The kernel fc_forward picks for these tensors (out = (o, lse) buffers), e.g. 'split-tf32 64x32', with
        its split-KV runs where it splits ('tensor-core 128x128 x4 runs')."""
        p = self.params(q, k, v, out[0], out[1], causal, **features)
        path, bm, bn, splits = ctypes.c_int32(), ctypes.c_int32(), ctypes.c_int32(), ctypes.c_int32()
        status = self.lib.fc_select_config(ctypes.byref(p), ctypes.byref(path), ctypes.byref(bm), ctypes.byref(bn),
                                           self.msg, len(self.msg))
        if status == 0:
            status = self.lib.fc_effective_splits(ctypes.byref(p), ctypes.byref(splits), self.msg, len(self.msg))
        if status != 0:
            return f"error: {self.msg.value.decode()}"
        runs = f" x{splits.value} runs" if splits.value > 1 else ""
        return f"{FC_PATHS.get(path.value, '?')} {bm.value}x{bn.value}{runs}"


class Timer:
    """Median of CUDA-event-timed runs after warm-up, with L2 flushed (a 2x-L2 memset) before each run.

    sync (the default): each run alone, an event, the call, an event, then a wait for it; whatever the host spends
    on a call beyond the flush's GPU time lies between the events, as for a caller that waits on every call.
    queued: the same flush, events and call for every run, queued behind a GPU sleep before the first starts, so
    the host stays ahead of the GPU and the events time only what the GPU does."""

    QUEUE_SLEEP_CYCLES = 2_000_000  # about 1 ms at 1.98 GHz: longer than the host takes to queue the runs

    def __init__(self, warmup, iters, queued=False):
        self.warmup, self.iters, self.queued = warmup, iters, queued
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        self.flush_buf = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")

    def median_ms(self, fn):
        for _ in range(self.warmup):
            fn()
        if self.queued:
            torch.cuda.synchronize()
            torch.cuda._sleep(self.QUEUE_SLEEP_CYCLES)
        events = []
        for _ in range(self.iters):
            self.flush_buf.zero_()
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            if not self.queued:
                stop.synchronize()
            events.append((start, stop))
        torch.cuda.synchronize()
        times = sorted(start.elapsed_time(stop) for start, stop in events)
        return times[len(times) // 2]

    def back_to_back_ms(self, fn):
        """Mean of iters calls run back to back, no flush between them (events around all of them), after the
        warm-up: the steady state of repeated calls, launch gaps and what one call leaves to the next included."""
        for _ in range(self.warmup):
            fn()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(self.iters):
            fn()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / self.iters


def compiled_flex_attention():
    """FlexAttention torch.compile'd once per process, for the benchmarks that run it beside flashcheck.
    Every (shape, mask_mod, score_mod) compiles its own kernel; past dynamo's default cache limit (8) it would fall
    back to eager FlexAttention, which materializes the scores. dynamic=False: by default dynamo recompiles with
    symbolic sizes once a second shape arrives, and those kernels run FlexAttention up to 1.45x slower (bf16
    d = 64 N = 8192 causal on an H100: 260 against 376 TFLOP/s); every shape gets its own static kernel,
    FlexAttention's best."""
    if getattr(compiled_flex_attention, "fn", None) is None:
        from torch.nn.attention.flex_attention import flex_attention
        torch._dynamo.config.cache_size_limit = 1024
        torch._dynamo.config.accumulated_cache_size_limit = 4096
        compiled_flex_attention.fn = torch.compile(flex_attention, dynamic=False)
    return compiled_flex_attention.fn


def sdpa(backend, q, k, v, causal):
    with sdpa_kernel([getattr(SDPBackend, BACKENDS[backend])]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def import_fa3():
    """FlashAttention-3's forward (flash_attn_func on [B, N, H, d] tensors) from the fa3-fwd wheel, a build of
    FlashAttention's hopper/ tree (bf16 and fp8 forward), and the wheel's version; None where it does not import."""
    try:
        from fa3_fwd_interface import flash_attn_func
        from importlib.metadata import version
        return flash_attn_func, version("fa3-fwd")
    except Exception:  # noqa: BLE001 (absent, or built for another GPU or PyTorch)
        return None


def runner(fc, name, q, k, v, causal, out, nhd=None):
    """The timed call of one backend. nhd: the inputs in [B, N, H, d] (FlashAttention-3's layout), transposed once
    outside the timed region."""
    if name == "flashcheck":
        return fc.bound_call(q, k, v, causal, out)
    if name == "fa3":
        if FA3 is None or q.dtype != torch.bfloat16:
            raise RuntimeError("fa3: the fa3-fwd wheel is absent or has no kernel for this dtype")
        nhd = nhd or tuple(t.transpose(1, 2).contiguous() for t in (q, k, v))
        return lambda: FA3[0](*nhd, causal=causal)
    return lambda: sdpa(name, q, k, v, causal)


def output(fc, name, q, k, v, causal):
    """One backend's O for [B, H, N, d] inputs, in that layout."""
    if name == "flashcheck":
        return fc.forward(q, k, v, causal)
    if name == "fa3":
        r = runner(fc, name, q, k, v, causal, None)()
        return (r[0] if isinstance(r, tuple) else r).transpose(1, 2)
    return sdpa(name, q, k, v, causal)


def measure(fc, timer, rounds, dtype, d, causal, n, b, h, dv=None):
    """One shape's row: TFLOP/s per backend, `rounds` passes over the backends, each pass one median-of-iters
    measurement per backend, and the median of the passes reported (the backends interleave, so a clock or
    thermal drift over the run reaches them alike); `<name>_spread` is the largest pass over the smallest.
    dv: V's and O's head dim where it differs from d (FLOPs 2*B*H*N^2*(d + dv), halved for causal)."""
    dv = d if dv is None else dv
    q, k = (torch.randn(b, h, n, d, device="cuda", dtype=dtype) for _ in range(2))
    v = torch.randn(b, h, n, dv, device="cuda", dtype=dtype)
    out = (torch.empty(b, h, n, dv, device="cuda", dtype=dtype), torch.empty(q.shape[:3], device="cuda", dtype=torch.float32))
    nhd = tuple(t.transpose(1, 2).contiguous() for t in (q, k, v)) if "fa3" in COLUMNS else None
    flops = 2 * b * h * n * n * (d + dv) * (0.5 if causal else 1.0)
    row = {"dtype": str(dtype).split(".")[1], "d": d, "causal": causal, "N": n, "B": b, "H": h,
           "flashcheck_kernel": fc.kernel_path(q, k, v, causal, out)}
    if dv != d:
        row["dv"] = dv
    passes = {name: [] for name in COLUMNS}
    for _ in range(rounds):
        for name in COLUMNS:
            if (name == "math" and n > MATH_MAX_SEQLEN) or name + "_error" in row:
                continue
            try:
                passes[name].append(flops / timer.median_ms(runner(fc, name, q, k, v, causal, out, nhd)) / 1e9)
            except RuntimeError as ex:  # a backend that does not serve these inputs
                row[name + "_error"] = str(ex).splitlines()[0][:120]
    for name, tflops in passes.items():
        row[name] = round(statistics.median(tflops), 1) if tflops else None
        if len(tflops) > 1:
            row[name + "_spread"] = round(max(tflops) / min(tflops), 3)
    print(json.dumps(row), flush=True)
    del q, k, v, out, nhd
    torch.cuda.empty_cache()
    return row


def throughput(fc, timer, quick, rounds):
    """The FlashAttention paper's grid (B*N = 16384, H*d = 2048), every shape measured by measure()."""
    seqlens = [1024, 4096] if quick else [512, 1024, 2048, 4096, 8192, 16384]
    grid = [(dt, d, causal, n) for dt in (torch.bfloat16, torch.float16) for d in (64, 128, 256)
            for causal in (False, True) for n in seqlens]
    grid += [(torch.float32, d, False, n) for d in (64, 128) for n in (1024, 4096)]
    return [measure(fc, timer, rounds, dtype, d, causal, n, TOKENS // n, MODEL_DIM // d) for dtype, d, causal, n in grid]


def heads_sweep(fc, timer, quick, rounds):
    """bf16, d = 128, N = 4096, B = 1, heads 1..32, causal and not: how throughput grows with the work per launch
    when the grid alone (one head: 32 Q tiles for 132 SMs) cannot fill the GPU."""
    heads = HEADS_QUICK if quick else HEADS_SWEEP
    return [measure(fc, timer, rounds, torch.bfloat16, 128, causal, 4096, 1, h) for causal in (False, True)
            for h in heads]


# V's and O's head dim unlike Q's and K's: DeepSeek's (192, 128) beside (192, 192), its equal-dims twin, over N, and
# the other pairs models ship at N = 4096; bf16, B*N = 16384, H = 16.
VALUE_DIM_PAIRS = ((192, 128), (192, 192))
VALUE_DIM_OTHERS = ((128, 64), (64, 128), (256, 128))


def value_dims(fc, timer, quick, rounds):
    seqlens = [4096] if quick else [1024, 2048, 4096, 8192, 16384]
    grid = [(d, dv, causal, n) for d, dv in VALUE_DIM_PAIRS for causal in (False, True) for n in seqlens]
    grid += [(d, dv, causal, 4096) for d, dv in VALUE_DIM_OTHERS for causal in (False, True)]
    return [measure(fc, timer, rounds, torch.bfloat16, d, causal, n, TOKENS // n, 16, dv=dv)
            for d, dv, causal, n in grid]


# fp8 (e4m3) forward: d = 128 and 256, causal and not, N = 4k-16k (B*N = 16384, H*d = 2048), O in bf16.
FP8_SEQLENS = (4096, 8192, 16384)
FA3_FP8_PUBLISHED_RMS = 2.4e-2  # FlashAttention-3 paper, fp8 without block quantisation or incoherent processing


def fp8(fc, timer, quick, rounds):
    """flashcheck's fp8 kernel beside FlashAttention-3's fp8 forward and flashcheck's bf16 kernel on the same values
    (every e4m3 value is a bf16 value), TFLOP/s; and O's relative RMS error against float64 on the dequantised inputs
    (normal(0, 1) values rounded to e4m3), flashcheck's and FlashAttention-3's."""
    rows = []
    for d in (128, 256):
        for causal in (False, True):
            for n in (FP8_SEQLENS[:1] if quick else FP8_SEQLENS):
                b, h = TOKENS // n, MODEL_DIM // d
                q8, k8, v8 = (torch.randn(b, h, n, d, device="cuda").to(torch.float8_e4m3fn) for _ in range(3))
                q16, k16, v16 = (t.to(torch.bfloat16) for t in (q8, k8, v8))
                o8 = (torch.empty(b, h, n, d, device="cuda", dtype=torch.bfloat16),
                      torch.empty(b, h, n, device="cuda", dtype=torch.float32))
                o16 = (torch.empty_like(o8[0]), torch.empty_like(o8[1]))
                nhd8 = tuple(t.transpose(1, 2).contiguous() for t in (q8, k8, v8)) if FA3 is not None else None
                calls = {"flashcheck_fp8": fc.bound_call(q8, k8, v8, causal, o8),
                         "flashcheck_bf16": fc.bound_call(q16, k16, v16, causal, o16)}
                if FA3 is not None:
                    calls["fa3_fp8"] = lambda: FA3[0](*nhd8, causal=causal)
                flops = 4 * b * h * n * n * d * (0.5 if causal else 1.0)
                row = {"d": d, "causal": causal, "N": n, "B": b, "H": h,
                       "flashcheck_kernel": fc.kernel_path(q8, k8, v8, causal, o8)}
                passes = {name: [] for name in calls}
                for _ in range(rounds):
                    for name, call in calls.items():
                        if name + "_error" in row:
                            continue
                        try:
                            passes[name].append(flops / timer.median_ms(call) / 1e9)
                        except RuntimeError as ex:
                            row[name + "_error"] = str(ex).splitlines()[0][:120]
                for name, tflops in passes.items():
                    row[name] = round(statistics.median(tflops), 1) if tflops else None
                if n == FP8_SEQLENS[0]:
                    ref = sdpa("math", q8.double(), k8.double(), v8.double(), causal)
                    outputs = {"flashcheck_fp8": lambda: (calls["flashcheck_fp8"](), o8[0])[1]}
                    if FA3 is not None:
                        outputs["fa3_fp8"] = lambda: (lambda r: r[0] if isinstance(r, tuple) else r)(calls["fa3_fp8"]()).transpose(1, 2)
                    for name, get in outputs.items():
                        if name + "_error" not in row:
                            o = get().double()
                            row[name + "_rel_rms"] = float((o - ref).norm() / ref.norm())
                print(json.dumps(row), flush=True)
                rows.append(row)
                del q8, k8, v8, q16, k16, v16, o8, o16, nhd8, calls
                torch.cuda.empty_cache()
    return rows


def fp8_markdown(rows):
    if not rows:
        return ""
    lines = ["", "## fp8 (e4m3 inputs, O in bf16)", "",
             "TFLOP/s (FLOPs 4 B H N^2 d, halved for causal); relative RMS error of O against float64 on the "
             f"dequantised inputs at N = {FP8_SEQLENS[0]} (FlashAttention-3's paper: {FA3_FP8_PUBLISHED_RMS}).", "",
             "| d | causal | N | flashcheck fp8 | FlashAttention-3 fp8 | flashcheck bf16 | fp8 ÷ FA3 | RMS flashcheck | RMS FA3 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r['flashcheck_fp8'] / r['fa3_fp8']:.2f}" if r.get("flashcheck_fp8") and r.get("fa3_fp8") else ""
        rms = [f"{r[k]:.2e}" if k in r else "" for k in ("flashcheck_fp8_rel_rms", "fa3_fp8_rel_rms")]
        lines.append(f"| {r['d']} | {'yes' if r['causal'] else 'no'} | {r['N']} | {fmt(r.get('flashcheck_fp8'))} | "
                     f"{fmt(r.get('fa3_fp8'))} | {fmt(r.get('flashcheck_bf16'))} | {ratio} | {rms[0]} | {rms[1]} |")
    return "\n".join(lines) + "\n"


def accuracy(fc, seed=0, dtypes=None, echo=True):
    """Relative RMS error ||O - O*|| / ||O*|| against float64 SDPA on the same rounded inputs (peer configs)."""
    dtypes = dtypes or (torch.bfloat16, torch.float16, torch.float32)
    rows = []
    gen = torch.Generator(device="cuda").manual_seed(seed)
    configs = [(1024, 64, False, 1.0), (1024, 128, True, 1.0), (4096, 128, False, 1.0), (1024, 128, False, 8.0),
               (1000, 96, True, 1.0), (1, 128, False, 1.0), (4099, 128, False, 1.0)]
    for dtype in dtypes:
        for n, d, causal, amp in configs:
            b, h = 2, 4
            q = (torch.randn(b, h, n, d, device="cuda", generator=gen) * amp).to(dtype)
            k = (torch.randn(b, h, n, d, device="cuda", generator=gen) * amp).to(dtype)
            v = torch.randn(b, h, n, d, device="cuda", generator=gen).to(dtype)
            with sdpa_kernel([SDPBackend.MATH]):
                ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
            row = {"dtype": str(dtype).split(".")[1], "N": n, "d": d, "causal": causal, "amp": amp}
            for name in COLUMNS:
                try:
                    o = output(fc, name, q, k, v, causal).double()
                    err = o - ref
                    row[name] = {"rel_rms": float(err.norm() / ref.norm()), "max_abs": float(err.abs().max()),
                                 "nan": bool(torch.isnan(o).any())}
                except RuntimeError as ex:
                    row[name] = None
                    row[name + "_error"] = str(ex).splitlines()[0][:120]
            rows.append(row)
            if echo:
                print(json.dumps(row), flush=True)
    return rows


def accuracy_seeds(fc, seeds, out):
    """accuracy() for seeds 0..seeds-1 (fp16/bf16): flashcheck's error over each peer's, per configuration."""
    runs = [accuracy(fc, seed, (torch.bfloat16, torch.float16), echo=False) for seed in range(seeds)]
    peers = [name for name in COLUMNS if name not in ("flashcheck", "math")]
    lines = [f"flashcheck's relative RMS error over each peer's on the same inputs, {seeds} seeds (inputs as in "
             "side_by_side.md's accuracy table): geometric mean [min, max], and the seeds where flashcheck's is "
             "lower or equal.", "", "| dtype | N | d | causal | amp | " + " | ".join(peers) + " |",
             "|---|---|---|---|---|" + "---|" * len(peers)]
    summary = []
    for i, first in enumerate(runs[0]):
        cells, entry = [], {k: first[k] for k in ("dtype", "N", "d", "causal", "amp")}
        for peer in peers:
            ratios = [r[i]["flashcheck"]["rel_rms"] / r[i][peer]["rel_rms"] for r in runs
                      if r[i].get(peer) and r[i].get("flashcheck") and r[i][peer]["rel_rms"] > 0]
            if not ratios:
                cells.append("")
                continue
            geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
            lower = sum(1 for x in ratios if x <= 1.0)
            entry[peer] = {"geomean": geo, "min": min(ratios), "max": max(ratios), "lower_or_equal": lower,
                           "seeds": len(ratios)}
            cells.append(f"{geo:.4f} [{min(ratios):.4f}, {max(ratios):.4f}] {lower}/{len(ratios)}")
        summary.append(entry)
        lines.append(f"| {first['dtype']} | {first['N']} | {first['d']} | {first['causal']} | {first['amp']} | "
                     + " | ".join(cells) + " |")
    with open(os.path.join(out, "accuracy_seeds.json"), "w") as f:
        json.dump({"seeds": seeds, "summary": summary, "runs": runs}, f, indent=1)
    md = "\n".join(lines) + "\n"
    with open(os.path.join(out, "accuracy_seeds.md"), "w") as f:
        f.write(md)
    print(md)


def memory(fc, quick):
    """Peak allocated memory (inputs included) of one forward, bf16, d = 128, B = 1, H = 16."""
    rows = []
    seqlens = [1024, 4096] if quick else [512, 1024, 2048, 4096, 8192, 16384]
    for n in seqlens:
        row = {"dtype": "bfloat16", "d": 128, "B": 1, "H": 16, "N": n}
        for name in ("flashcheck", "math"):
            q, k, v = (torch.randn(1, 16, n, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            try:
                fc.forward(q, k, v) if name == "flashcheck" else sdpa(name, q, k, v, False)
                torch.cuda.synchronize()
                row[name + "_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
            except (RuntimeError, torch.OutOfMemoryError) as ex:
                row[name + "_mib"] = None
                row[name + "_error"] = str(ex).splitlines()[0][:120]
            del q, k, v
            torch.cuda.empty_cache()
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def fmt(x):
    return "" if x is None else str(x)


def markdown(meta, tp, heads, acc, mem, dims=()):
    lines = [f"Device: {meta['device']}, PyTorch {meta['torch']}, CUDA {meta['cuda']}, cuDNN {meta['cudnn']}, "
             f"{meta['flashcheck']}.", "",
             "Throughput in TFLOP/s (4·B·H·N²·d, halved for causal): per backend the median of "
             f"{meta.get('rounds', 1)} interleaved passes over the backends, each the median of {meta['iters']} runs after "
             f"{meta['warmup']} warm-up runs, L2 flushed before each"
             + ("; runs queued ahead of the GPU (GPU time only)" if meta.get("timing") == "queued" else
                "; each run timed alone (the host's cost beyond the flush included)")
             + "; B·N = 16384, H·d = 2048."]
    if tp:
        lines += ["", "| dtype | d | causal | N | " + " | ".join(COLUMNS) + " | flashcheck kernel |",
                  "|---|---|---|---|" + "---|" * (len(COLUMNS) + 1)]
    for r in tp:
        lines.append(f"| {r['dtype']} | {r['d']} | {r['causal']} | {r['N']} | "
                     + " | ".join(fmt(r.get(c)) for c in COLUMNS) + f" | {r['flashcheck_kernel']} |")
    if heads:
        lines += ["", "Heads sweep: bf16, d = 128, N = 4096, B = 1, H = " + ", ".join(str(h) for h in sorted({r["H"] for r in heads}))
                  + "; TFLOP/s as above.", "", "| causal | H | " + " | ".join(COLUMNS) + " | flashcheck kernel |",
                  "|---|---|" + "---|" * (len(COLUMNS) + 1)]
    for r in heads:
        lines.append(f"| {r['causal']} | {r['H']} | " + " | ".join(fmt(r.get(c)) for c in COLUMNS)
                     + f" | {r['flashcheck_kernel']} |")
    if acc:
        lines += ["", "Accuracy: relative RMS error ‖O−O*‖/‖O*‖ against float64 SDPA on the same rounded inputs; "
                  "B = 2, H = 4, inputs randn·amp (V randn). Empty: the backend does not serve the inputs.", "",
                  "| dtype | N | d | causal | amp | " + " | ".join(COLUMNS) + " | flashcheck max_abs |",
                  "|---|---|---|---|---|" + "---|" * (len(COLUMNS) + 1)]
    for r in acc:
        cells = [("NaN!" if r[c]["nan"] else f"{r[c]['rel_rms']:.3g}") if r.get(c) else "" for c in COLUMNS]
        fc_max = f"{r['flashcheck']['max_abs']:.3g}" if r.get("flashcheck") else ""
        lines.append(f"| {r['dtype']} | {r['N']} | {r['d']} | {r['causal']} | {r['amp']} | " + " | ".join(cells)
                     + f" | {fc_max} |")
    if dims:
        lines += ["", "Unequal head dims (d for Q and K, dv for V and O): bf16, B·N = 16384, H = 16; TFLOP/s as above with "
                  "2·B·H·N²·(d + dv) FLOPs; per FLOP: flashcheck's throughput over its own at (192, 192), same N and "
                  "mask. Empty: the backend does not serve the inputs.", "",
                  "| d | dv | causal | N | " + " | ".join(COLUMNS) + " | per FLOP | flashcheck kernel |",
                  "|---|---|---|---|" + "---|" * (len(COLUMNS) + 2)]
        twin = {(r["causal"], r["N"]): r.get("flashcheck") for r in dims if r["d"] == 192 and "dv" not in r}
        for r in dims:
            base = twin.get((r["causal"], r["N"])) if r["d"] == 192 and r.get("dv") else None
            per_flop = f"{r['flashcheck'] / base:.2f}" if base and r.get("flashcheck") else ""
            lines.append(f"| {r['d']} | {r.get('dv', r['d'])} | {r['causal']} | {r['N']} | "
                         + " | ".join(fmt(r.get(c)) for c in COLUMNS) + f" | {per_flop} | {r['flashcheck_kernel']} |")
    if mem:
        lines += ["", "Peak device memory of one forward (MiB, torch.cuda.max_memory_allocated, inputs included), "
                  "bf16, d = 128, B = 1, H = 16.", "", "| N | flashcheck | math |", "|---|---|---|"]
    for r in mem:
        lines.append(f"| {r['N']} | {fmt(r.get('flashcheck_mib'))} | {fmt(r.get('math_mib'))} |")
    return "\n".join(lines) + "\n"


STYLES = {"flashcheck": ("k", "o", 2.5), "fa3": ("tab:purple", "D", 1.2), "flash": ("tab:blue", "s", 1.2),
          "cudnn": ("tab:green", "^", 1.2),
          "efficient": ("tab:orange", "v", 1.2), "math": ("tab:red", "x", 1.2)}  # plot color, marker, line width


def tflops_panel(ax, rows, x_key, x_label, title):
    """One panel: TFLOP/s of every backend against rows[x_key] (log2 axis)."""
    rows = sorted(rows, key=lambda r: r[x_key])
    for name in COLUMNS:
        pts = [(r[x_key], r[name]) for r in rows if r.get(name)]
        if pts:
            color, marker, width = STYLES[name]
            ax.plot(*zip(*pts), color=color, marker=marker, linewidth=width, label=name)
    ax.set_xscale("log", base=2)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(x_label)
    ax.set_ylabel("TFLOP/s")
    ax.grid(alpha=0.3)


def plots(tp, heads, mem, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    styles = STYLES
    for dtype in ("bfloat16", "float16", "float32"):
        rows = [r for r in tp if r["dtype"] == dtype]
        if not rows:
            continue
        dims = sorted({r["d"] for r in rows})
        causals = sorted({r["causal"] for r in rows})
        fig, axes = plt.subplots(len(causals), len(dims), figsize=(4.2 * len(dims), 3.4 * len(causals)),
                                 squeeze=False)
        for i, causal in enumerate(causals):
            for j, d in enumerate(dims):
                sel = [r for r in rows if r["d"] == d and r["causal"] == causal]
                tflops_panel(axes[i][j], sel, "N", "seq_len N", f"{dtype} d={d} {'causal' if causal else 'non-causal'}")
        axes[0][0].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, f"tflops_{SHORT_DTYPE[dtype]}.png"), dpi=110)
        plt.close(fig)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), squeeze=False)
    for j, causal in enumerate((False, True)):
        sel = [r for r in heads if r["causal"] == causal]
        tflops_panel(axes[0][j], sel, "H", "heads H", f"bf16 d=128 N=4096 B=1 {'causal' if causal else 'non-causal'}")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "heads.png"), dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for name in ("flashcheck", "math"):
        pts = [(r["N"], r[name + "_mib"]) for r in mem if r.get(name + "_mib")]
        if pts:
            color, marker, width = styles[name]
            ax.plot(*zip(*pts), color=color, marker=marker, linewidth=width,
                    label="flashcheck" if name == "flashcheck" else "standard attention (math)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("seq_len N")
    ax.set_ylabel("peak memory (MiB)")
    ax.set_title("bf16, d=128, B=1, H=16: peak memory of one forward", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "memory.png"), dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib", default=DEFAULT_LIB,
                        help="path to libflashcheck.so (target flashcheck_shared; default: %(default)s)")
    parser.add_argument("--quick", action="store_true", help="two seq_lens per curve (a smoke run)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved passes over the backends per shape")
    bench_cli.add_arguments(parser, SECTIONS)
    parser.add_argument("--accuracy-seeds", type=int, default=0, metavar="N",
                        help="only the accuracy configurations, for seeds 0..N-1 (fp16/bf16), against each peer "
                             "(writes accuracy_seeds.{md,json})")
    args = parser.parse_args()
    chosen, out = bench_cli.resolve(parser, args, SECTIONS, partial=args.quick)
    if torch is None:
        parser.error("needs PyTorch with CUDA (import torch failed)")
    os.makedirs(out, exist_ok=True)
    # A backend that cannot serve the inputs raises (recorded as an empty cell) after warning why; the
    # warnings would bury the tables.
    warnings.filterwarnings("ignore", category=UserWarning, module="torch")
    warnings.filterwarnings("ignore", category=UserWarning, message=".*(not used|runtime disabled|Expected query|does not support).*")
    torch.backends.cuda.matmul.allow_tf32 = False  # the math backend in true fp32 for the fp32 rows
    fc = Flashcheck(args.lib)
    global FA3
    FA3 = import_fa3()
    if FA3 is not None:
        COLUMNS.insert(1, "fa3")
    props = torch.cuda.get_device_properties(0)
    meta = {"device": f"{props.name} ({props.multi_processor_count} SMs)", "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "flashcheck": fc.lib.fc_version().decode(), "warmup": args.warmup, "iters": args.iters,
            "rounds": args.rounds, "fa3": FA3[1] if FA3 else None, **bench_cli.meta(args, chosen)}
    print(json.dumps(meta), flush=True)
    if args.accuracy_seeds > 0:
        accuracy_seeds(fc, args.accuracy_seeds, out)
        return 0
    start = time.time()
    timer = Timer(args.warmup, args.iters, queued=args.timing == "queued")
    tp = throughput(fc, timer, args.quick, args.rounds) if "throughput" in chosen else []
    heads = heads_sweep(fc, timer, args.quick, args.rounds) if "heads" in chosen else []
    dims = value_dims(fc, timer, args.quick, args.rounds) if "value_dims" in chosen else []
    acc = accuracy(fc) if "accuracy" in chosen else []
    mem = memory(fc, args.quick) if "memory" in chosen else []
    fp8_rows = fp8(fc, timer, args.quick, args.rounds) if "fp8" in chosen else []
    meta["seconds"] = round(time.time() - start, 1)
    with open(os.path.join(out, "side_by_side.json"), "w") as f:
        json.dump({"meta": meta, "throughput": tp, "heads_sweep": heads, "value_dims": dims, "accuracy": acc,
                   "memory": mem, "fp8": fp8_rows}, f, indent=1)
    md = markdown(meta, tp, heads, acc, mem, dims) + fp8_markdown(fp8_rows)
    with open(os.path.join(out, "side_by_side.md"), "w") as f:
        f.write(md)
    if tp or heads or mem:
        plots(tp, heads, mem, out)
    print(md)
    print(f"side_by_side: {meta['seconds']} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
