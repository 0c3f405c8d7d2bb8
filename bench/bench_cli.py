"""The command line every benchmark script shares: where results go, which sections run, how runs are timed.

--out    the output folder. By default out/bench (ignored by git): a plain run never touches bench/results, the
         result set the READMEs show. bench/results is written only when named (--out bench/results, as
         bench/run_bench.sh does), and only by a whole run: a partial one (--only, --quick) is refused there, so the
         set never mixes runs of different scope.
--only   a comma-separated subset of the script's sections (all by default).
--timing sync or queued (bench/side_by_side.py's Timer); recorded, with the sections and the command line, in the
         output's metadata (meta()).
Parsing needs neither PyTorch nor a GPU: a bad argument is refused with its name before anything runs.
Usage, in a script: bench_cli.add_arguments(parser, SECTIONS); chosen, out = bench_cli.resolve(parser, args, SECTIONS);
its output records bench_cli.meta(args, chosen). Run alone, it prints this text.
"""
import os
import shlex
import sys

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(BENCH_DIR, "results")
DEFAULT_OUT = os.path.join(os.path.dirname(BENCH_DIR), "out", "bench")
TIMING_MODES = ("sync", "queued")
TIMING_HELP = ("sync: each run alone, the host's cost beyond the L2 flush counted; queued: runs queued ahead of the "
               "GPU, GPU time only (side_by_side.Timer)")


def add_arguments(parser, sections, timing=True):
    """--out, --only over `sections` (a tuple of names) and, where the script times with Timer, --timing."""
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="output folder (default: out/bench; bench/results only when named, and only by a whole "
                             "run)")
    parser.add_argument("--only", default="", metavar="SECTIONS",
                        help=f"comma-separated sections to run: {', '.join(sections)} (default: all)")
    if timing:
        parser.add_argument("--timing", choices=TIMING_MODES, default="sync", help=TIMING_HELP)


def resolve(parser, args, sections, partial=False):
    """The sections chosen (in `sections` order) and the output folder (made when written); parser.error() (exit 2, the argument
    named) on an unknown section or on a partial run into bench/results. `partial`: the script's own options make
    this run partial (--quick, a subset of cases)."""
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(sections))
    if unknown:
        parser.error(f"--only: unknown section(s) {', '.join(unknown)}; sections: {', '.join(sections)}")
    chosen = [s for s in sections if not chosen or s in chosen]
    out = os.path.abspath(args.out) if args.out else DEFAULT_OUT
    if out == os.path.abspath(RESULTS) and (partial or len(chosen) < len(sections)):
        what = "--only " + ",".join(chosen) if len(chosen) < len(sections) else "this partial run"
        parser.error(f"--out: bench/results holds one whole result set; {what} writes part of one: give another "
                     "--out")
    return chosen, out


def meta(args, chosen, timing=None):
    """What the output records of how it was made: the sections, the timing mode and the command line."""
    return {"sections": chosen, "timing": timing if timing is not None else getattr(args, "timing", None),
            "command": " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0])] + sys.argv[1:])}


def describe(m):
    """One line for a Markdown table's header: the timing mode and the sections."""
    return f"Timing: {m['timing']}; sections: {', '.join(m['sections'])}; command: `{m['command']}`."


if __name__ == "__main__":
    print(__doc__.strip())
