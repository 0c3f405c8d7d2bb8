"""The seed workload: the 30 fp32 cases (B, N, d) of a course's FlashAttention homework, verified and timed.

Every case is one head, non-causal, fp32, d = 32 or 64, N = 128..32768, B = 13600..2 (CASES). Each is
  verified  as a case line (f32, hq = hkv = 1, Q, K, V normal(0,1), seed = its place in CASES, 1-based) run by
            flashcheck-report --cases on the kernel (--backend gpu) or the host model (--backend model) and judged
            against the oracle. Every case has more than 4096 query rows, so the report checks sampled rows: the
            structural rows (first and last, Q-tile boundaries) of the first and the last (batch, head) pair plus
            64 seeded random rows; the worst error / bound of O and of LSE over them is kept (fail above 1).
            Input generation is single-threaded on the host, so the cases are shared out over --jobs report
            processes, balanced by estimated host time; all of it ends before anything is timed.
  timed     on torch.randn fp32 tensors [B, 1, N, d] (the same tensors for every backend): flashcheck through its
            C ABI, PyTorch SDPA's memory-efficient and math backends (TF32 off: the math backend in true fp32).
            bench/side_by_side.py's machinery: its ctypes wrapper (FcParams built once, outside the timed call),
            its timer (warm-up, then the median of CUDA-event-timed runs, L2 flushed before each), and its
            interleaved passes: per backend the median of --rounds passes that alternate between the backends.
            A backend whose single run is long gets fewer runs per pass (at least 3, the timed runs of one case
            about 2 s); a backend that runs out of device memory is recorded as OOM (the math backend holds
            B·N² fp32 scores: 17 GB at B = 4, N = 32768). FLOPs = 4·B·N²·d (side_by_side's 4·B·H·N²·d, H = 1).
            The JSON also keeps, per case, flashcheck's O from the timed runs against the efficient backend's
            (relative RMS difference), so each timed call is known to have computed this attention.
Prints and writes (to --out: bench/bench_cli.py):
  seed_workload.json  every measurement and verdict
  seed_workload.md    the table: verdict, worst O and LSE error / bound, ms and TFLOP/s per backend, speedup
Usage (--lib defaults to build/gpu/bench/libflashcheck.so, --report to build/gpu/tools/flashcheck-report):
       python3 bench/seed_workload.py --out bench/results   # regenerates bench/results/seed_workload.{json,md}
       python3 bench/seed_workload.py --quick [--out OUT_DIR]
       python3 bench/seed_workload.py --backend model --report build/ci/tools/flashcheck-report --quick
Sections (--only): verify, timing. Without PyTorch or a CUDA device (or with --only verify) the timing is skipped,
with the reason printed, and the verification runs alone; --backend model needs neither (keep to small cases there: the host model computes
every row).
"""
import argparse
import copy
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)
import bench_cli  # noqa: E402
import side_by_side as sbs  # noqa: E402  (the C ABI wrapper, the timer, sdpa())

torch = sbs.torch
DEFAULT_REPORT = os.path.join(os.path.dirname(BENCH_DIR), "build", "gpu", "tools", "flashcheck-report")

# (B, N, d) in the homework's order; a case's seed is its 1-based place here, whatever subset runs.
CASES = [(320, 128, 32), (160, 128, 64), (160, 256, 32), (80, 256, 64), (80, 512, 32), (40, 512, 64),
         (40, 1024, 32), (20, 1024, 64), (20, 2048, 32), (10, 2048, 64), (13600, 128, 32), (9600, 128, 64),
         (6400, 256, 32), (2000, 256, 64), (2000, 512, 32), (800, 512, 64), (800, 1024, 32), (300, 1024, 64),
         (300, 2048, 32), (100, 2048, 64), (500, 2048, 32), (500, 2048, 64), (100, 4096, 32), (100, 4096, 64),
         (30, 8192, 32), (10, 8192, 64), (10, 16384, 32), (4, 16384, 64), (4, 32768, 32), (2, 32768, 64)]
# --quick: both head_dims, the shortest and a longer N; small enough for the host model (about 20 s on 2 cores).
SECTIONS = ("verify", "timing")
QUICK = [(320, 128, 32), (160, 128, 64), (80, 512, 32), (40, 512, 64)]
TIMED = ["flashcheck", "efficient", "math"]  # columns; efficient and math are side_by_side's SDPA backends
REPORT_SCHEMA = "flashcheck-report/1"
MAX_JOBS = 8
BACKEND_BUDGET_MS = 2000.0  # timed runs of one backend on one case, over all passes, before runs are cut
MIN_ITERS = 3
# Host cost of a case in flashcheck-report, to balance the report processes: budget.h's rates (kTermsPerSecond,
# kHalfRateDim, kEmulatedCostFactor, kModelCostFactor), the rows a sampled check takes at these shapes (68 to 110
# at N = 128 and 512; more Q tiles, more boundary rows), and input generation and guards per element (measured on
# the host model: about 28 s for 3 x 79M fp32 elements on one core).
TERMS_PER_SECOND = 1e8
HALF_RATE_DIM = 2.0
EMULATED_COST_FACTOR = 12.0
MODEL_COST_FACTOR = 4.0
SAMPLED_ROWS = 120
INPUT_SECONDS_PER_ELEMENT = 1.2e-7


def case_line(b, n, d, seed):
    """The case line of (B, N, d) in canonical form (harness/src/case.cpp format_case)."""
    return (f"f32 b={b} hq=1 hkv=1 sq={n} sk={n} d={d} mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) "
            f"seed={seed}")


def flops(b, n, d):
    return 4 * b * n * n * d


# ---- verification ------------------------------------------------------------------------------------------


def estimated_seconds(b, n, d, backend, threads):
    """Host time of one case in flashcheck-report, for sharing the cases out: input generation (single-threaded,
    every element), the verdict's sampled rows (about SAMPLED_ROWS rows of n keys on `threads` threads, the exact
    row and the emulated reference: harness/include/flashcheck/budget.h), and on the host model its run of every
    row (one thread)."""
    rate = TERMS_PER_SECOND * d / (d + HALF_RATE_DIM)
    seconds = 3 * b * n * d * INPUT_SECONDS_PER_ELEMENT
    seconds += SAMPLED_ROWS * n * d * (1 + EMULATED_COST_FACTOR) / (rate * threads)
    if backend == "model":
        seconds += b * n * n * d * MODEL_COST_FACTOR / rate
    return seconds


def shards(cases, jobs, backend, threads):
    """Cases (seed, b, n, d) shared out over `jobs` groups, the longest first onto the lightest group."""
    cost = {c: estimated_seconds(*c[1:], backend, threads) for c in cases}
    groups = [[] for _ in range(jobs)]
    loads = [0.0] * jobs
    for c in sorted(cases, key=cost.get, reverse=True):
        i = loads.index(min(loads))
        groups[i].append(c)
        loads[i] += cost[c]
    return [g for g in groups if g]


def verify(cases, report, backend, jobs, memory_cap):
    """flashcheck-report --cases on every case, in parallel processes; returns {seed: verdict dict}."""
    if not os.access(report, os.X_OK):
        sys.exit(f"seed_workload.py: no flashcheck-report at {report} (build target flashcheck-report, or pass "
                 "--report PATH)")
    jobs = max(1, min(jobs, len(cases)))
    threads = max(1, (os.cpu_count() or 1) // jobs)  # the oracle's OpenMP team per process
    groups = shards(cases, jobs, backend, threads)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    verdicts = {}
    with tempfile.TemporaryDirectory(prefix="seed_workload.") as tmp:
        procs = []
        for i, group in enumerate(groups):
            cases_path, json_path, log_path = (os.path.join(tmp, f"shard{i}.{ext}") for ext in ("cases", "json", "log"))
            with open(cases_path, "w") as f:
                f.write("".join(case_line(b, n, d, seed) + "\n" for seed, b, n, d in group))
            cmd = [report, "--backend", backend, "--cases", cases_path, "--json", json_path]
            if memory_cap:
                cmd += ["--memory-cap", memory_cap]
            with open(log_path, "w") as log:
                procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), json_path,
                              log_path, cmd))
        print(f"verification: {len(cases)} cases on {len(groups)} flashcheck-report processes ({backend}, "
              f"{threads} oracle threads each)", flush=True)
        for proc, json_path, log_path, cmd in procs:
            rc = proc.wait()
            with open(log_path) as f:
                log = f.read()
            closing = re.findall(r"^(?:PASS|FAIL|REJECTED|UNSUPPORTED|OUTSIDE-DOMAIN): .*$", log, re.M)
            if closing:
                print(f"  flashcheck-report {os.path.basename(json_path)[:-5]}: {closing[-1]}", flush=True)
            if not os.path.exists(json_path):  # usage error, unreadable file, no device: no results at all
                sys.exit(f"seed_workload.py: {' '.join(cmd)} exited {rc} without results:\n{log[-3000:]}")
            with open(json_path) as f:
                doc = json.load(f)
            if doc.get("schema") != REPORT_SCHEMA:
                sys.exit(f"seed_workload.py: {json_path}: schema {doc.get('schema')!r}, expected {REPORT_SCHEMA}")
            for entry in doc["cases"]:
                seed = int(re.search(r"\bseed=(\d+)", entry["case"]).group(1))
                verdicts[seed] = {key: entry.get(key) for key in ("case", "outcome", "reason", "kernel", "o_ratio",
                                                                  "lse_ratio", "rms_ratio", "max_o_err_eps",
                                                                  "rows_checked", "failures")}
                if entry["outcome"] != "PASS":
                    print(f"{entry['outcome']}: {entry['case']}" + "".join(
                        f"\n  {line}" for line in [entry.get("reason") or ""] + (entry.get("failures") or []) if line),
                          flush=True)
    return verdicts


# ---- timing --------------------------------------------------------------------------------------------------


def timing_unavailable(lib):
    """Why the timing cannot run here, or None."""
    if torch is None:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device"
    if not os.path.exists(lib):
        sys.exit(f"seed_workload.py: no {lib} (build target flashcheck_shared of the gpu preset, or pass --lib)")
    return None


def probe_ms(call):
    """One run, synchronized, timed with CUDA events: a warm-up run that sizes the passes and meets an OOM first."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    call()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop)


def time_case(fc, timer, b, n, d, seed, rounds):
    """ms per backend on one case: the median of `rounds` interleaved passes, each timer.median_ms()."""
    torch.manual_seed(seed)
    q, k, v = (torch.randn(b, 1, n, d, device="cuda", dtype=torch.float32) for _ in range(3))
    out = (torch.empty_like(q), torch.empty(q.shape[:3], device="cuda", dtype=torch.float32))
    row = {"flashcheck_kernel": fc.kernel_path(q, k, v, False, out)}
    calls, timers = {}, {}
    for name in TIMED:
        call = sbs.runner(fc, name, q, k, v, False, out)
        try:
            probe_ms(call)  # the first run also pays one-time costs (module loading, library handles)
            first = probe_ms(call)
        except torch.OutOfMemoryError:
            row[name + "_error"] = "OOM"
            torch.cuda.empty_cache()
            continue
        except RuntimeError as ex:  # a backend that does not serve these inputs
            row[name + "_error"] = str(ex).splitlines()[0][:120]
            continue
        calls[name] = call
        timers[name] = copy.copy(timer)  # shares the L2 flush buffer; its own run count
        timers[name].iters = max(MIN_ITERS, min(timer.iters, int(BACKEND_BUDGET_MS / (max(first, 1e-3) * rounds))))
        row[name + "_iters"] = timers[name].iters
    passes = {name: [] for name in calls}
    for _ in range(rounds):
        for name in list(calls):
            try:
                passes[name].append(timers[name].median_ms(calls[name]))
            except torch.OutOfMemoryError:  # memory taken by an earlier backend's cache: recorded, not retried
                row[name + "_error"] = "OOM"
                del calls[name]
                torch.cuda.empty_cache()
            except RuntimeError as ex:
                row[name + "_error"] = str(ex).splitlines()[0][:120]
                del calls[name]
    for name in TIMED:
        ms = passes.get(name) if name + "_error" not in row else None
        row[name + "_ms"] = round(statistics.median(ms), 5) if ms else None
        row[name + "_tflops"] = round(flops(b, n, d) / statistics.median(ms) / 1e9, 1) if ms else None
        if ms and len(ms) > 1:
            row[name + "_spread"] = round(max(ms) / min(ms), 3)
    # The timed call computed this attention: flashcheck's O (left in `out` by its last run) against the
    # efficient backend's on the same tensors.
    if row["flashcheck_ms"] and row["efficient_ms"]:
        ref = sbs.sdpa("efficient", q, k, v, False)
        row["fc_vs_efficient_rel_rms"] = float(f"{float((out[0] - ref).norm() / ref.norm()):.3g}")
        del ref
    for name in ("efficient", "math"):
        if row["flashcheck_ms"] and row[name + "_ms"]:
            row["speedup_vs_" + name] = round(row[name + "_ms"] / row["flashcheck_ms"], 3)
    del q, k, v, out, calls
    torch.cuda.empty_cache()
    return row


# ---- output --------------------------------------------------------------------------------------------------


def ratio_text(x):
    return "" if x is None else f"{x:.3g}"


def ms_text(row, name):
    if row.get(name + "_error"):
        return "OOM" if row[name + "_error"] == "OOM" else "error"
    return "" if row.get(name + "_ms") is None else f"{row[name + '_ms']:.3g}"


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def summary_lines(rows, meta):
    out = []
    verified = [r for r in rows if r.get("verdict")]
    if verified:
        passed = sum(1 for r in verified if r["verdict"]["outcome"] == "PASS")
        worst_o = max((r["verdict"]["o_ratio"] for r in verified if r["verdict"].get("o_ratio") is not None),
                      default=None)
        worst_lse = max((r["verdict"]["lse_ratio"] for r in verified if r["verdict"].get("lse_ratio") is not None),
                        default=None)
        worst = (f"; worst O error / bound {ratio_text(worst_o)}, worst LSE error / bound {ratio_text(worst_lse)}"
                 if worst_o is not None else "")
        out.append(f"Verified: {passed} of {len(verified)} cases pass ({meta['verification_backend']}){worst}.")
    for name in ("efficient", "math"):
        ratios = [r["speedup_vs_" + name] for r in rows if r.get("speedup_vs_" + name)]
        if ratios:
            out.append(f"flashcheck over {name}: {min(ratios):.2f}x-{max(ratios):.2f}x, geometric mean "
                       f"{geomean(ratios):.2f}x over {len(ratios)} cases.")
    return out


def markdown(meta, rows):
    if meta.get("timing_skipped"):
        head = f"Timing skipped: {meta['timing_skipped']}."
    else:
        head = (f"Device: {meta['device']}, PyTorch {meta['torch']}, CUDA {meta['cuda']}, {meta['flashcheck']}. "
                f"Timing: per backend the median of {meta['rounds']} interleaved passes over the backends, each the "
                f"median of up to {meta['iters']} runs (fewer for a long run: the timed runs of one backend on one "
                f"case about {BACKEND_BUDGET_MS / 1000:g} s, at least {MIN_ITERS}) after {meta['warmup']} warm-up "
                "runs, L2 flushed before each; torch.randn fp32 tensors [B, 1, N, d], the same for every backend; "
                "TFLOP/s = 4·B·N²·d / time; the math backend in true fp32 (TF32 off); OOM: out of device memory.")
    if meta.get("verification_backend"):
        check = (f"Verification: flashcheck-report ({meta['verification_backend']}) on each case line (Q, K, V "
                 "normal(0,1), seed = the case's place in the list), judged against the oracle on sampled rows (the "
                 "structural rows of the first and last (batch, head) pair and 64 random rows); O and LSE: the worst "
                 "error / bound over them, failing above 1.")
    else:
        check = "Verification not run (--only timing)."
    lines = [f"The seed workload: {len(rows)} fp32 cases (B, N, d) of a course's FlashAttention homework, one head, "
             "non-causal. " + head, "", check, "", bench_cli.describe(meta), "",
             "| B | N | d | verified | O err/bound | LSE err/bound | rows checked | flashcheck ms | TFLOP/s "
             "| efficient ms | TFLOP/s | math ms | TFLOP/s | ÷ efficient | flashcheck kernel |",
             "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        v = r.get("verdict") or {}
        verdict = {"PASS": "pass", None: ""}.get(v.get("outcome"), v.get("outcome"))
        cells = [r["B"], r["N"], r["d"], verdict, ratio_text(v.get("o_ratio")), ratio_text(v.get("lse_ratio")),
                 sbs.fmt(v.get("rows_checked"))]
        for name in TIMED:
            cells += [ms_text(r, name), sbs.fmt(r.get(name + "_tflops"))]
        speedup = r.get("speedup_vs_efficient")
        cells += ["" if speedup is None else f"{speedup:.2f}", r.get("flashcheck_kernel", "")]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    summary = summary_lines(rows, meta)
    if summary:
        lines += [""] + summary
    return "\n".join(lines) + "\n"


# ---- main ----------------------------------------------------------------------------------------------------


def parse_case(text):
    try:
        b, n, d = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected B,N,d (e.g. 320,128,32), got {text!r}")
    if (b, n, d) not in CASES:
        raise argparse.ArgumentTypeError(f"{text} is not one of the seed workload's cases")
    return (b, n, d)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--report", default=DEFAULT_REPORT, help="flashcheck-report executable (default: %(default)s)")
    ap.add_argument("--backend", choices=["gpu", "model"], default="gpu",
                    help="what flashcheck-report verifies: the kernel (gpu) or the host model (default: %(default)s)")
    ap.add_argument("--lib", default=sbs.DEFAULT_LIB, help="libflashcheck.so to time (default: %(default)s)")
    ap.add_argument("--quick", action="store_true", help=f"{len(QUICK)} small cases (a smoke run)")
    ap.add_argument("--case", action="append", type=parse_case, metavar="B,N,d",
                    help="run only this case of the list (repeatable)")
    ap.add_argument("--jobs", type=int, default=min(MAX_JOBS, os.cpu_count() or 1),
                    help="flashcheck-report processes in parallel (default: %(default)s)")
    ap.add_argument("--memory-cap", metavar="SIZE", help="passed to flashcheck-report (default: its own)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20, help="timed runs per pass, at most (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved passes over the backends (default: %(default)s)")
    bench_cli.add_arguments(ap, SECTIONS)
    args = ap.parse_args()
    chosen_sections, out = bench_cli.resolve(ap, args, SECTIONS, partial=args.quick or bool(args.case))
    verify_cases = "verify" in chosen_sections

    chosen = args.case or (QUICK if args.quick else CASES)
    cases = [(CASES.index(c) + 1, *c) for c in CASES if c in chosen]  # (seed, b, n, d) in list order
    meta = {"cases": len(cases), "verification_backend": args.backend if verify_cases else None,
            "warmup": args.warmup, "iters": args.iters, "rounds": args.rounds, **bench_cli.meta(args, chosen_sections)}
    skipped = "--only verify" if "timing" not in chosen_sections else timing_unavailable(args.lib)
    if skipped:
        meta["timing_skipped"] = skipped
        print(f"seed_workload.py: timing skipped ({skipped}); verification only", flush=True)
    rows = [{"B": b, "N": n, "d": d, "seed": seed, "case": case_line(b, n, d, seed), "flops": flops(b, n, d)}
            for seed, b, n, d in cases]

    start = time.time()
    if verify_cases:
        verdicts = verify(cases, args.report, args.backend, args.jobs, args.memory_cap)
        for r in rows:
            # A case without an entry was not run (left after a case that lost the CUDA context).
            r["verdict"] = verdicts.get(r["seed"], {"case": r["case"], "outcome": "NOT-RUN"})
        meta["verification_seconds"] = round(time.time() - start, 1)
        print(f"verification: {meta['verification_seconds']} s", flush=True)

    if not skipped:
        # As side_by_side.py: a backend that cannot serve the inputs raises after warning why; the warnings would
        # bury the output.
        warnings.filterwarnings("ignore", category=UserWarning, module="torch")
        torch.backends.cuda.matmul.allow_tf32 = False  # the math backend in true fp32
        fc = sbs.Flashcheck(args.lib)
        props = torch.cuda.get_device_properties(0)
        meta.update({"device": f"{props.name} ({props.multi_processor_count} SMs)", "torch": torch.__version__,
                     "cuda": torch.version.cuda, "flashcheck": fc.lib.fc_version().decode()})
        timer = sbs.Timer(args.warmup, args.iters, queued=args.timing == "queued")
        timing_start = time.time()
        for r in rows:
            r.update(time_case(fc, timer, r["B"], r["N"], r["d"], r["seed"], args.rounds))
            print(json.dumps({k: v for k, v in r.items() if k not in ("case", "verdict")}), flush=True)
        meta["timing_seconds"] = round(time.time() - timing_start, 1)
    meta["seconds"] = round(time.time() - start, 1)

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "seed_workload.json"), "w") as f:
        json.dump({"meta": meta, "cases": rows}, f, indent=1)
    md = markdown(meta, rows)
    with open(os.path.join(out, "seed_workload.md"), "w") as f:
        f.write(md)
    print(md)
    print(f"seed_workload: {meta['seconds']} s", flush=True)
    failed = [r for r in rows if verify_cases and (r.get("verdict") or {}).get("outcome") != "PASS"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
