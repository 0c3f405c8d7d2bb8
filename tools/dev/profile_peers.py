#!/usr/bin/env python3
"""Nsight Compute on flashcheck and cuDNN (PyTorch SDPA) at the same points, on the same tensors: every kernel
each backend launches for one call, with its launch shape (grid, block, registers, shared memory), its time, how
evenly its SMs are loaded (the busiest SM's active cycles over the average) and what its pipes and warp
schedulers do. The kernels' names and shapes say how the peer tiles the work; the load and pipe figures say
where each backend's time goes.

Runs itself under ncu (--workload is that inner run): warm-up calls outside the profiled ranges, then one call
per backend inside cudaProfilerStart/Stop. ncu fixes the clocks at base and flushes the caches before each
kernel, so times are longer than a benchmark's but alike for both backends.

usage: python3 tools/dev/profile_peers.py --lib build/gpu/bench/libflashcheck.so [--points d:causal:N ...]
       [--dtype bf16] [--opcodes]    (points default to the short causal ones and a few long ones)
Prints a table per point and writes the ncu report and its raw CSV to $OUT/profile_peers/. --opcodes profiles the
first point's main kernel of each backend again with SourceCounters and prints the instructions each executed,
by opcode, side by side (what one backend executes that the other does not), then each kernel's blocks of
instructions executed equally often with the warp cycles one execution takes (how a warp's time splits between
the tile loop, the per-item code and the masked tiles); the SASS source pages are kept as sass_<backend>.csv.
"""
import argparse
import csv
import io
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_POINTS = ["64:1:512", "64:1:2048", "128:1:512", "256:1:512", "64:0:8192", "128:0:8192", "256:0:8192"]
BACKENDS = ("flashcheck", "cudnn")
SECTIONS = ("LaunchStats", "Occupancy", "SpeedOfLight", "ComputeWorkloadAnalysis", "SchedulerStats",
            "WarpStateStats", "MemoryWorkloadAnalysis")
EXTRA_METRICS = ("sm__cycles_active.max", "sm__cycles_active.avg", "sm__cycles_active.min")
# (column, raw metric): what the table prints per kernel (None: derived in table())
COLUMNS = [
    ("us", "gpu__time_duration.sum"),
    ("grid", "launch__grid_size"),
    ("block", "launch__block_size"),
    ("regs", "launch__registers_per_thread"),
    ("smemKB", "launch__shared_mem_per_block_dynamic"),
    ("busiest/avg", None),
    ("kinst/SM", None),
    ("tensor%", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"),
    ("issue%", "smsp__issue_active.avg.pct_of_peak_sustained_active"),
    ("eligible", "smsp__warps_eligible.avg.per_cycle_active"),
    ("xu%", "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"),
    ("fma%", "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active"),
    ("alu%", "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active"),
    ("dram%", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
]


def parse_points(specs):
    points = []
    for spec in specs:
        d, causal, n = spec.split(":")
        points.append((int(d), causal in ("1", "causal", "true"), int(n)))
    return points


# the main kernel of each backend's call (flashcheck's first launch, not its redo launch)
MAIN_KERNEL = {"flashcheck": "regex:tensor_core_ws_kernel|tensor_core_forward_kernel", "cudnn": "regex:cudnn"}


def workload(args):
    import torch
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import side_by_side as sbs
    fc = sbs.Flashcheck(args.lib)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    for d, causal, n in parse_points(args.points):
        b, h = sbs.TOKENS // n, sbs.MODEL_DIM // d
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=dtype) for _ in range(3))
        out = (torch.empty_like(q), torch.empty(q.shape[:3], device="cuda", dtype=torch.float32))
        for name in args.backends:
            fn = sbs.runner(fc, name, q, k, v, causal, out)
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            fn()
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
        del q, k, v, out
    return 0


TIME_UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6}  # to µs


def value(row, metric):
    raw = row.get(metric)
    if raw in (None, "", "n/a"):
        return None
    try:
        x = float(raw.replace(",", ""))
    except ValueError:
        return None
    return x * TIME_UNITS[row["units"][metric]] if metric == "gpu__time_duration.sum" else x


FC_KERNELS = ("tensor_core_ws_kernel", "tensor_core_forward_kernel", "split_tf32_wgmma_kernel",
              "split_tf32_forward_kernel", "general_forward_kernel", "combine_kernel", "decode_kernel")


def backend_of(name):
    return "flashcheck" if "flashcheck" in name or any(k in name for k in FC_KERNELS) else "peer"


def table(rows, points):
    """Rows of the raw CSV in launch order, grouped by point: a point starts where a flashcheck kernel follows a
    peer's (each point profiles flashcheck's call, then the peer's)."""
    groups, prev = [], None
    for row in rows:
        who = backend_of(row["Kernel Name"])
        if who == "flashcheck" and prev != "flashcheck":
            groups.append([])
        if groups:
            groups[-1].append(row)
        prev = who
    header = f"{'backend':10} {'kernel':24} " + " ".join(f"{c:>11}" for c, _ in COLUMNS)
    for (d, causal, n), group in zip(points, groups):
        print(f"\n== d = {d} {'causal' if causal else 'non-causal'} N = {n}")
        print(header)
        total, names = {}, {}
        for row in group:
            who = backend_of(row["Kernel Name"])
            cells = []
            mx, avg = value(row, "sm__cycles_active.max"), value(row, "sm__cycles_active.avg")
            for col, metric in COLUMNS:
                if col == "busiest/avg":
                    cells.append(f"{mx / avg:11.3f}" if mx and avg else f"{'-':>11}")
                    continue
                if col == "kinst/SM":  # warp instructions issued per SM
                    ipc = value(row, "sm__inst_issued.avg.per_cycle_active")
                    cells.append(f"{ipc * avg / 1e3:11.1f}" if ipc and avg else f"{'-':>11}")
                    continue
                x = value(row, metric)
                cells.append(f"{x:11.1f}" if x is not None else f"{'-':>11}")
            us = value(row, "gpu__time_duration.sum")
            total[who] = total.get(who, 0.0) + (us or 0.0)
            full = row["Kernel Name"]
            short = full.removeprefix("void ").split("<")[0].split("(")[0].split("::")[-1]
            print(f"{who:10} {short[:24]:24} " + " ".join(cells))
            names.setdefault(full[:240], None)
        for full in names:
            print(f"  {full}")
        if total.get("peer"):
            print(f"kernel time flashcheck / peer: {total.get('flashcheck', 0) / total['peer']:.3f} "
                  f"({total.get('flashcheck', 0):.1f} us / {total['peer']:.1f} us)")


def profile(ncu, ncu_args, report, log, args, points, backends):
    """This script's workload (--workload: points, backends) under ncu with ncu_args, into REPORT.ncu-rep."""
    cmd = [ncu, "--profile-from-start", "off", *ncu_args, "-f", "-o", report, sys.executable,
           os.path.abspath(__file__), "--workload", "--lib", args.lib, "--dtype", args.dtype, "--points", *points,
           "--backends", *backends]
    with open(log, "w") as f:
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT)
    if rc != 0:
        print(f"ncu exited {rc}; see {log}", file=sys.stderr)
    return rc


def page(ncu, report, *page_args):
    """A page of REPORT.ncu-rep as CSV text."""
    return subprocess.run([ncu, "--import", report + ".ncu-rep", "--csv", "--page", *page_args], capture_output=True,
                          text=True, check=True).stdout


def raw_rows(text):
    """The raw page's rows (one per kernel, in launch order) as dicts, each with its metrics' units under "units"."""
    header, units, *data = list(csv.reader(io.StringIO(text)))
    return [dict(zip(header, r), units=dict(zip(header, units))) for r in data]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="libflashcheck.so (target flashcheck_shared)")
    ap.add_argument("--points", nargs="+", default=DEFAULT_POINTS, help="d:causal:N, causal 1 or 0")
    ap.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    ap.add_argument("--opcodes", action="store_true", help="also the first point's instruction mix per backend")
    ap.add_argument("--workload", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--backends", nargs="+", default=list(BACKENDS), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.workload:
        return workload(args)
    ncu = shutil.which("ncu") or next((p for p in ("/usr/local/cuda/bin/ncu",) if os.path.exists(p)), None)
    if ncu is None:
        print("ncu not found", file=sys.stderr)
        return 2
    out_dir = os.path.join(os.environ.get("OUT", "out"), "profile_peers")
    os.makedirs(out_dir, exist_ok=True)
    report = os.path.join(out_dir, "peers")
    ncu_args = ["--target-processes", "all", "--metrics", ",".join(EXTRA_METRICS)]
    for section in SECTIONS:
        ncu_args += ["--section", section]
    rc = profile(ncu, ncu_args, report, os.path.join(out_dir, "ncu.log"), args, args.points, BACKENDS)
    if rc != 0:
        return rc
    raw = page(ncu, report, "raw")
    with open(os.path.join(out_dir, "raw.csv"), "w") as f:
        f.write(raw)
    rows = raw_rows(raw)
    table(rows, parse_points(args.points))
    if args.opcodes:
        return opcodes(ncu, args, out_dir)
    return 0


def sass_page(path):
    """(opcode, executed warp instructions, stall samples) per SASS line of an ncu source page, in address order."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    head = next(i for i, r in enumerate(rows) if "Source" in r)
    cols = rows[head]
    ex = next(i for i, c in enumerate(cols) if c.startswith("Instructions Executed") or c == "Warp Instructions Executed")
    samples = cols.index("Warp Stall Sampling (All Samples)")
    src = cols.index("Source")
    num = lambda x: float(x.replace(",", "") or 0)  # noqa: E731
    lines = []
    for r in rows[head + 1:]:
        if len(r) != len(cols):
            continue
        words = r[src].split()
        if words and words[0].startswith("@"):
            words = words[1:]
        lines.append((words[0].split(".")[0] if words else "?", num(r[ex]), num(r[samples])))
    return lines


def opcode_counts(lines):
    counts = {}
    for op, executed, _ in lines:
        counts[op] = counts.get(op, 0.0) + executed
    return counts


def blocks(name, lines, warps_per_cta, cycles_per_sm, sms):
    """Runs of consecutive instructions executed equally often (a basic block or a few) with their share of the
    stall samples, and that share as warp cycles per execution: samples fall on resident warps in proportion to
    their time, so a block's share of (warps per CTA x active cycles x SMs) over its executions is what one warp
    spends in it each time it runs it (one CTA per SM)."""
    total = sum(s for _, _, s in lines) or 1.0
    runs = []
    for op, executed, s in lines:
        if runs and runs[-1][0] == executed:
            runs[-1][1].append(op)
            runs[-1][2] += s
        else:
            runs.append([executed, [op], s])
    print(f"\n-- {name}: blocks with 0.4% of the stall samples or more")
    print(f"{'executed':>10} {'instr':>6} {'samples%':>9} {'cyc/exec':>9}  most frequent opcodes")
    for executed, ops, s in runs:
        if executed == 0 or s / total < 0.004:
            continue
        cycles = s / total * warps_per_cta * cycles_per_sm * sms / executed
        common = sorted(set(ops), key=lambda o: -ops.count(o))[:6]
        print(f"{executed:10.0f} {len(ops):6d} {100 * s / total:9.2f} {cycles:9.0f}  " +
              " ".join(f"{o}:{ops.count(o)}" for o in common))


def opcodes(ncu, args, out_dir):
    counts, shapes = {}, {}
    for name in BACKENDS:
        report = os.path.join(out_dir, f"sass_{name}")
        ncu_args = ["--kernel-name", MAIN_KERNEL[name], "--launch-count", "1", "--section", "SourceCounters",
                    "--metrics", "sm__cycles_active.avg,launch__block_size,device__attribute_multiprocessor_count",
                    "--import-source", "no"]
        rc = profile(ncu, ncu_args, report, os.path.join(out_dir, f"ncu_{name}.log"), args, args.points[:1], [name])
        if rc != 0:
            return rc
        path = os.path.join(out_dir, f"sass_{name}.csv")
        with open(path, "w") as f:
            f.write(page(ncu, report, "source", "--print-source", "sass"))
        launch = raw_rows(page(ncu, report, "raw"))[0]
        lines = sass_page(path)
        counts[name] = opcode_counts(lines)
        shapes[name] = (lines, value(launch, "launch__block_size") / 32, value(launch, "sm__cycles_active.avg"),
                        value(launch, "device__attribute_multiprocessor_count"))
    fc, peer = counts["flashcheck"], counts["cudnn"]
    total_fc, total_peer = sum(fc.values()), sum(peer.values())
    print(f"\n== instructions executed (warp instructions, whole launch), {args.points[0]}")
    print(f"{'opcode':14} {'flashcheck':>12} {'cudnn':>12} {'fc - cudnn':>12}")
    for op in sorted(set(fc) | set(peer), key=lambda o: -abs(fc.get(o, 0) - peer.get(o, 0))):
        a, b = fc.get(op, 0), peer.get(op, 0)
        if max(a, b) >= 0.002 * max(total_fc, total_peer):
            print(f"{op:14} {a:12.0f} {b:12.0f} {a - b:12.0f}")
    print(f"{'total':14} {total_fc:12.0f} {total_peer:12.0f} {total_fc - total_peer:12.0f}")
    for name in BACKENDS:
        blocks(name, *shapes[name])
    return 0


if __name__ == "__main__":
    sys.exit(main())
