#!/usr/bin/env python3
"""Plots of a flashcheck-report JSON (flashcheck-report --json PATH, schema docs/report-json.md).

The plots an engineer looks at first, one file each in OUTDIR:
  o_ratio_hist.FMT          per dtype, the distribution of each case's worst O error / bound (log x; fail above 1)
  o_ratio_vs_seqlen_k.FMT   each case's worst O error / bound against seqlen_k (log-log)
  o_ratio_vs_head_dim.FMT   the same against head_dim
Cases without a verdict (rejected, unsupported) are left out; a worst ratio of 0 is drawn at the floor of the
axis and a non-finite one (null in the JSON: a NaN where a number was expected) at its top, both counted in
the legend. --table prints the points as tab-separated text instead and needs no matplotlib.

Exit status: 0 done, 2 usage error, 65 the file is not a flashcheck-report JSON, 66 it cannot be read,
69 matplotlib is not installed (Debian: python3-matplotlib).
"""
import argparse
import json
import math
import os
import sys

SCHEMA_PREFIX = "flashcheck-report/"
FLOOR = 1e-4  # ratios below this (0 included) are drawn here
DTYPE_ORDER = ("f32", "f16", "bf16")


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="plot_report.py", description=__doc__.split("\n\n")[0],
        epilog="example: flashcheck-report --backend model --json r.json; tools/plot_report.py r.json -o plots/")
    parser.add_argument("report", help="the JSON that flashcheck-report --json wrote")
    parser.add_argument("-o", "--out", help="directory for the plots (default: REPORT without .json, plus -plots)")
    parser.add_argument("--format", default="png", choices=("png", "svg", "pdf"), help="file format (default png)")
    parser.add_argument("--table", action="store_true",
                        help="print dtype, seqlen_k, head_dim, worst O ratio per case (tab-separated); no plots")
    return parser.parse_args(argv)


def case_field(line, key):
    """The integer value of KEY=... in a canonical case line (None when absent)."""
    for word in line.split():
        if word.startswith(key + "="):
            try:
                return int(word[len(key) + 1:])
            except ValueError:
                return None
    return None


def points(doc):
    """(dtype, seqlen_k, head_dim, ratio) per judged case; ratio is math.inf for null (non-finite)."""
    out = []
    for case in doc.get("cases", []):
        if "o_ratio" not in case:  # never ran: no verdict
            continue
        line = case["case"]
        ratio = case["o_ratio"]
        out.append((line.split()[0], case_field(line, "sk"), case_field(line, "d"),
                    math.inf if ratio is None else float(ratio)))
    return out


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        print(f"plot_report.py: cannot read {path}: {e.strerror}", file=sys.stderr)
        sys.exit(66)
    except ValueError as e:
        print(f"plot_report.py: {path} is not JSON: {e}", file=sys.stderr)
        sys.exit(65)
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith(SCHEMA_PREFIX):
        print(f"plot_report.py: {path} is not a flashcheck-report JSON (schema {SCHEMA_PREFIX}N)", file=sys.stderr)
        sys.exit(65)
    return doc


def by_dtype(pts):
    groups = {}
    for p in pts:
        groups.setdefault(p[0], []).append(p)
    return sorted(groups.items(), key=lambda kv: (DTYPE_ORDER.index(kv[0]) if kv[0] in DTYPE_ORDER else 9, kv[0]))


def plot(doc, pts, out_dir, fmt):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    finite = [p[3] for p in pts if math.isfinite(p[3])]
    top = max([1.0] + finite) * 2
    clip = lambda r: top if not math.isfinite(r) else max(r, FLOOR)
    title = f"flashcheck-report ({doc.get('backend', '?')}, {doc.get('outcome', '?')}, {len(pts)} judged cases)"
    os.makedirs(out_dir, exist_ok=True)
    written = []

    def label(dtype, group):
        extra = []
        zeros = sum(1 for p in group if p[3] < FLOOR)
        nonfinite = sum(1 for p in group if not math.isfinite(p[3]))
        if zeros:
            extra.append(f"{zeros} below {FLOOR:g}")
        if nonfinite:
            extra.append(f"{nonfinite} non-finite")
        return f"{dtype} ({len(group)} cases{', ' + ', '.join(extra) if extra else ''})"

    def finish(fig, ax, name, xlabel, ylabel, ratio_on_x):
        # The bound: error / bound = 1, fail beyond it.
        line = ax.axvline if ratio_on_x else ax.axhline
        line(1.0, color="red", linestyle="--", linewidth=1, label="error = bound (fail beyond)")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        path = os.path.join(out_dir, f"{name}.{fmt}")
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        written.append(path)

    # Distribution per dtype, log-spaced bins from the floor to the top.
    fig, ax = plt.subplots(figsize=(7, 4))
    lo, hi = math.log10(FLOOR), math.log10(top)
    bins = [10 ** (lo + (hi - lo) * i / 40) for i in range(41)]
    for dtype, group in by_dtype(pts):
        ax.hist([clip(p[3]) for p in group], bins=bins, histtype="step", linewidth=1.5, label=label(dtype, group))
    ax.set_xscale("log")
    finish(fig, ax, "o_ratio_hist", "worst O error / bound per case", "cases", True)

    for index, (name, xlabel) in ((1, ("o_ratio_vs_seqlen_k", "seqlen_k")), (2, ("o_ratio_vs_head_dim", "head_dim"))):
        fig, ax = plt.subplots(figsize=(7, 4))
        for dtype, group in by_dtype(pts):
            xs = [p[index] for p in group if p[index] is not None and p[index] > 0]
            ys = [clip(p[3]) for p in group if p[index] is not None and p[index] > 0]
            ax.scatter(xs, ys, s=12, alpha=0.7, label=label(dtype, group))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        finish(fig, ax, name, xlabel, "worst O error / bound", False)
    return written


def main(argv):
    args = parse_args(argv)
    doc = load(args.report)
    pts = points(doc)
    if args.table:
        print("dtype\tseqlen_k\thead_dim\to_ratio")
        for dtype, sk, d, ratio in pts:
            print(f"{dtype}\t{sk}\t{d}\t{ratio:.6g}")
        return 0
    try:
        import matplotlib  # noqa: F401  (only to say clearly that it is missing)
    except ImportError:
        print("plot_report.py: matplotlib is not installed (Debian: apt-get install python3-matplotlib; "
              "or pip install matplotlib)", file=sys.stderr)
        return 69
    if not pts:
        print(f"plot_report.py: {args.report} has no judged case to plot", file=sys.stderr)
        return 65
    out_dir = args.out or (args.report[:-5] if args.report.endswith(".json") else args.report) + "-plots"
    for path in plot(doc, pts, out_dir, args.format):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
