#!/usr/bin/env python3
"""The suite measured on its own mutants: runs the budgeted GPU tier on every mutant of the catalogue
(flashcheck/mutants.h) and prints the kill table.

A build configured with the preset gpu-mutants compiles every mutant into the production kernels, all off;
FLASHCHECK_MUTANT=<name> switches one on at run time. For each mutant this runs
`properties_gpu --gtest_filter=Gpu_Properties.Budgeted` with FLASHCHECK_BUDGET (stopping at the first failing
property), then (where the main binary did not kill it) the instrumented binary with a tenth of the budget, and
replays every kill twice: the failing case line through flashcheck-repro with the mutant on (and off: the case
line must pass on the production kernels), and the RapidCheck reproduce string in the killing property's own test.
A mutant killed by no property within the budget is a survivor: the table names it, and the suite owes it a
generator, property or check.

--repeat N reruns each race mutant's killing property N times with the failing chunk's seed and shrinking off and
reports whether every run failed with the same case line (a race caught deterministically).

    cmake --preset gpu-mutants && cmake --build --preset gpu-mutants
    python3 tools/mutation_test.py --build build/gpu-mutants --budget 60 --repeat 10 --exclude tc-offset-32bit
    python3 tools/mutation_test.py ... --gpus 2      # in two parts at once, one per GPU, then one table

Writes the table to --markdown (default: the kill-table section of docs/mutation-testing.md) and the raw results
to --json (default bench/results/mutation.json).

--model runs the same measurement in the CPU tier on the host model's planted defects (flashcheck/host_model.h,
FLASHCHECK_PLANT=<name>): properties_model's budgeted tier, the case lines replayed by
`flashcheck-repro --backend model --defect <name>` (and without the defect); any build with the tests and tools
(default build/ci), no GPU. Its table goes to the model-kill-table section of docs/mutation-testing.md and to
bench/results/mutation_model.json.

    python3 tools/mutation_test.py --model --budget 20
"""
import argparse
import math
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE_BEGIN = "<!-- kill-table:begin (tools/mutation_test.py writes this section) -->"
TABLE_END = "<!-- kill-table:end -->"
MODEL_TABLE_BEGIN = "<!-- model-kill-table:begin (tools/mutation_test.py --model writes this section) -->"
MODEL_TABLE_END = "<!-- model-kill-table:end -->"

FAILED_RE = re.compile(r"^(\w+) failed \(chunk (\d+) of (\d+) cases, seed (\d+), after (\d+) passing cases, "
                       r"at ([0-9.]+) s of the budget\)", re.M)
CASE_RE = re.compile(r"^case line: (.+)$", re.M)
REPRO_RE = re.compile(r"reproduce=([A-Za-z0-9_\-]+)")
# A case that leaves the CUDA context unusable (an illegal address, a trap) ends the process; the harness prints the
# case line first (properties/checks.cpp): a kill by the property the line names, at the run's end.
STICKY_RE = re.compile(r"the CUDA context is lost: (.*?) on\ncase line: (.+)$", re.M)
PROPERTY_RE = re.compile(r"\bproperty=(\w+)")
BUDGET_LINE_RE = re.compile(r"^\[ BUDGET   \] (\d+) cases in ([0-9.]+) s", re.M)
PROPERTY_LINE_RE = re.compile(r"^\[ BUDGET   \] (\w+)\s+(\d+) cases in\s+([0-9.]+) s", re.M)


def parse_failure(output):
    """What a failing budgeted run printed: the property, when, the chunk's seed and cases, the case line and
    the reproduce string (None where absent)."""
    m = FAILED_RE.search(output)
    if not m:
        sticky = STICKY_RE.search(output)
        prop = PROPERTY_RE.search(sticky.group(2)) if sticky else None
        if not prop:
            return None
        # No chunk report: the case is the last one run, the seconds the run's own (budgeted() fills them in).
        return {"property": prop.group(1), "chunk": None, "chunk_cases": None, "chunk_seed": None,
                "passing_cases": 0, "seconds": None,
                "case_line": sticky.group(2).strip(), "reproduce": None, "binary_note": " (CUDA context lost)"}
    tail = output[m.end():]
    cases = CASE_RE.findall(tail)
    repro = REPRO_RE.search(tail)
    return {
        "property": m.group(1),
        "chunk": int(m.group(2)),
        "chunk_cases": int(m.group(3)),
        "chunk_seed": int(m.group(4)),
        "passing_cases": int(m.group(5)),
        "seconds": float(m.group(6)),
        "case_line": cases[-1].strip() if cases else None,
        "reproduce": repro.group(1) if repro else None,
    }


def run(cmd, env, timeout):
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           errors="replace", timeout=timeout)
        return p.returncode, p.stdout, time.monotonic() - t0
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return None, out, time.monotonic() - t0


PERTURB = {"seed": 0}  # FLASHCHECK_PERTURB of every run (--perturb)
MODEL = {"on": False}  # --model: host-model defects (FLASHCHECK_PLANT) instead of kernel mutants


def mutant_env(name, **extra):
    env = dict(os.environ)
    for key in ("RC_PARAMS", "FLASHCHECK_PLANT", "FLASHCHECK_MUTANT"):
        env.pop(key, None)
    if not MODEL["on"]:
        env["FLASHCHECK_MUTANT"] = name
    elif name != "none":
        env["FLASHCHECK_PLANT"] = name
    if PERTURB["seed"]:
        env["FLASHCHECK_PERTURB"] = str(PERTURB["seed"])
    env.update({k: str(v) for k, v in extra.items()})
    return env


def budgeted(binary, suite, mutant, budget, seed, timeout):
    env = mutant_env(mutant, FLASHCHECK_BUDGET=f"{budget:g}s", FLASHCHECK_SEED=seed)
    code, out, wall = run([str(binary), f"--gtest_filter={suite}.Budgeted"], env, timeout)
    total = BUDGET_LINE_RE.findall(out)
    return code, out, wall, (int(total[-1][0]) if total else 0)


def replay_case_line(repro, mutant, line):
    """flashcheck-repro's exit status on the case line: with the mutant on, then off (0 = pass, 1 = fail)."""
    if MODEL["on"]:
        on = run([str(repro), "--backend", "model", "--defect", mutant, line], mutant_env("none"), 600)[0]
        off = run([str(repro), "--backend", "model", line], mutant_env("none"), 600)[0]
    else:
        on = run([str(repro), "--backend", "gpu", line], mutant_env(mutant), 600)[0]
        off = run([str(repro), "--backend", "gpu", line], mutant_env("none"), 600)[0]
    return on, off


def replay_string(binary, suite, prop, mutant, reproduce):
    env = mutant_env(mutant, RC_PARAMS=f"reproduce={reproduce}")
    code, out, _ = run([str(binary), f"--gtest_filter={suite}.{prop}"], env, 600)
    return code


def repeat_same_line(binary, suite, kill, mutant, n):
    """Runs the killing property n times on the failing chunk's cases with shrinking off; the case lines seen."""
    lines = []
    for _ in range(n):
        env = mutant_env(mutant, RC_PARAMS=f"seed={kill['chunk_seed']} max_success={kill['chunk_cases']} noshrink=1")
        code, out, _ = run([str(binary), f"--gtest_filter={suite}.{kill['property']}"], env, 600)
        cases = CASE_RE.findall(out)
        lines.append(cases[-1].strip() if code not in (0, None) and cases else None)
    return lines


def markdown(results, meta):
    rows = [f"| {'defect' if meta.get('model') else 'mutant'} | family | bug class | killed by | s to kill | cases | "
            "case line replays (on / off) | "
            "reproduce string | case line |",
            "|---|---|---|---|---|---|---|---|---|"]
    code_name = {0: "pass", 1: "FAIL", None: "timeout"}
    for r in results:
        k = r.get("kill")
        if not k:
            why = r.get("note", "survived")
            rows.append(f"| `{r['name']}` | {r['family']} | {r['bug_class']} | **{why}** | - | {r['cases']} | - | - | - |")
            continue
        cl = r.get("case_line_replay")
        cl_text = f"{code_name.get(cl[0], cl[0])} / {code_name.get(cl[1], cl[1])}" if cl else "-"
        rs = r.get("reproduce_replay")
        rs_text = "-" if rs is None else ("fails" if rs not in (0, None) else "passes")
        line = (k["case_line"] or "-").replace("|", "\\|")
        rows.append(f"| `{r['name']}` | {r['family']} | {r['bug_class']} | {k['property']}{k.get('binary_note', '')} | "
                    f"{k['seconds']:.1f}{' (past the budget)' if k['seconds'] > meta['budget'] else ''} | "
                    f"{k['passing_cases'] + 1} | {cl_text} | {rs_text} | `{line}` |")
    killed = sum(1 for r in results if r.get("kill") and r["kill"]["seconds"] <= meta["budget"])
    noun = "planted defects" if meta.get("model") else "mutants"
    head = (f"{killed} of {len(results)} {noun} killed within the {meta['budget']:g} s budget "
            f"({meta['device']}, base seed {meta['seed']}"
            f"{', FLASHCHECK_PERTURB=' + str(meta['perturb']) if meta.get('perturb') else ''}; "
            f"`python3 tools/mutation_test.py {meta['args']}`). "
            "Seconds and cases count from the start of the budgeted run to the failing chunk's end.")
    out = [head, "", *rows]
    prod = meta.get("production")
    if prod and prod.get("properties"):
        subject = "host model's" if meta.get("model") else "production kernels'"
        out += ["", f"The {subject} budgeted run ({prod['cases']} cases in {prod['seconds']:g} s), cases per "
                "property:", "", "| property | cases | s |", "|---|---|---|"]
        out += [f"| {name} | {v['cases']} | {v['seconds']:g} |" for name, v in prod["properties"].items()]
    repeats = [r for r in results if r.get("repeat_lines") is not None]
    if repeats:
        out += ["", "Races, rerun on the failing chunk's cases with shrinking off:", "",
                "| mutant | runs | failed | same case line |", "|---|---|---|---|"]
        for r in repeats:
            lines = r["repeat_lines"]
            failed = sum(1 for x in lines if x)
            same = failed == len(lines) and len(set(lines)) == 1
            out.append(f"| `{r['name']}` | {len(lines)} | {failed} | {'yes' if same else 'no'} |")
    return "\n".join(out) + "\n"


def write_table(path, table, begin=TABLE_BEGIN, end=TABLE_END):
    text = path.read_text() if path.exists() else ""
    if begin in text and end in text:
        before, rest = text.split(begin, 1)
        after = rest.split(end, 1)[1]
        text = before + begin + "\n" + table + end + after
    else:
        text += "\n" + begin + "\n" + table + end + "\n"
    path.write_text(text)


def device_name():
    if MODEL["on"]:
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    return f"host model on {line.split(':', 1)[1].strip()}, {os.cpu_count()} cores"
        except OSError:
            pass
        return "host model"
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], stdout=subprocess.PIPE,
                              text=True, timeout=30).stdout.strip().splitlines()[0]
    except Exception:
        return "unknown device"


def self_test():
    """The parser against a failing budgeted run's text (CTest: tools_mutation_test_parser)."""
    sample = (
        "[ BUDGET   ] Gpu_Properties: 60 s over 27 properties, base seed 0\n"
        "Failure\nOracleAgreement failed (chunk 3 of 16 cases, seed 123, after 41 passing cases, at 2.50 s of the "
        "budget):\nFalsifiable after 2 tests and 3 shrinks\ncase line: f16 b=1 hq=1 sq=9 sk=9 d=64 seed=5\n"
        "case line: f16 b=1 hq=1 sq=8 sk=8 d=64 seed=5\nRC_PARAMS=\"reproduce=BAS_x-9\"\n")
    k = parse_failure(sample)
    expect = {"property": "OracleAgreement", "chunk": 3, "chunk_cases": 16, "chunk_seed": 123, "passing_cases": 41,
              "seconds": 2.5, "case_line": "f16 b=1 hq=1 sq=8 sk=8 d=64 seed=5", "reproduce": "BAS_x-9"}
    if k != expect:
        print(f"parse_failure: got {k}, want {expect}")
        return 1
    sticky = parse_failure(
        "[ BUDGET   ] Gpu_Properties: 60 s over 30 properties, base seed 0\n\nflashcheck: the CUDA context is lost: gpu "
        "failed with a sticky error (kernel execution: cudaErrorIllegalAddress: an illegal memory access was "
        "encountered) on\ncase line: f16 b=1 hq=3 sq=513 sk=257 d=64 dv=128 property=MemorySafety seed=7\n"
        "no further case can run in this process; replay that line with flashcheck-repro\n")
    if not sticky or sticky["property"] != "MemorySafety" or not sticky["case_line"].endswith("seed=7"):
        print(f"parse_failure: a lost CUDA context with its case line parsed as {sticky}")
        return 1
    if parse_failure("[ BUDGET   ] 10 cases in 60.0 s (budget 60 s)\n") is not None:
        print("parse_failure: a passing run parsed as a failure")
        return 1
    table = markdown([{"name": "m", "family": "f", "bug_class": "c", "cases": 3, "kill": dict(expect),
                       "case_line_replay": (1, 0), "reproduce_replay": 1, "repeat_lines": ["x", "x"]},
                      {"name": "s", "family": "f", "bug_class": "c", "cases": 90}],
                     {"budget": 60, "device": "d", "seed": 0, "args": ""})
    for needle in ("1 of 2 mutants killed", "| `m` | f | c | OracleAgreement | 2.5 | 42 | FAIL / pass | fails |",
                   "| `s` | f | c | **survived** |", "| `m` | 2 | 2 | yes |"):
        if needle not in table:
            print(f"markdown: missing {needle!r} in\n{table}")
            return 1
    # Every catalogue id has a guard in the kernels' sources, and every guard names a catalogue id.
    header = (ROOT / "kernel" / "include" / "flashcheck" / "mutants.h").read_text()
    enum = header.split("enum class Mutant", 1)[1].split("};", 1)[0]
    ids = set(re.findall(r"\b(k[A-Z]\w*)\b", enum)) - {"kNone", "kCount"}
    guarded = set()
    for path in (ROOT / "kernel" / "src").rglob("*"):
        if path.suffix in (".cuh", ".cu", ".h", ".cpp"):
            guarded |= set(re.findall(r"FC_MUTANT\((k\w+)\)", path.read_text()))
    if ids - guarded or guarded - ids:
        print(f"catalogue ids without a guard: {sorted(ids - guarded)}; guards without an id: {sorted(guarded - ids)}")
        return 1
    if len(ids) < 25:
        print(f"the catalogue holds {len(ids)} mutants, fewer than 25")
        return 1
    # Every planted defect of the host model is implemented there (used outside its catalogue entry).
    header = (ROOT / "kernel" / "include" / "flashcheck" / "host_model.h").read_text()
    enum = header.split("enum class ModelDefect", 1)[1].split("};", 1)[0]
    defects = set(re.findall(r"\b(k[A-Z]\w*)\b", enum)) - {"kNone"}
    model_src = "".join((ROOT / "kernel" / "src" / path).read_text()
                        for path in ("host_model.cpp", "backward/host_model.cpp", "host_dropout.h"))
    unused = sorted(d for d in defects if f"ModelDefect::{d}" not in model_src)
    if unused:
        print(f"host-model defects that the host model (host_model.cpp, backward/host_model.cpp, host_dropout.h) never applies: {unused}")
        return 1
    print(f"mutation_test.py self-test: ok ({len(ids)} mutants, each guarded in kernel/src; "
          f"{len(defects)} host-model defects, each applied in the host model)")
    return 0


def command_args(argv):
    """The run's arguments without the output paths (--markdown, --json and their values)."""
    kept, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--markdown", "--json"):
            skip = True
        elif not a.startswith(("--markdown=", "--json=")):
            kept.append(a)
    return kept


def save_json(path, meta, results):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")


def finish(args, meta, results):
    """Prints the table, writes it into --markdown; 0 when every mutant was killed within the budget."""
    table = markdown(results, meta)
    print(table)
    if MODEL["on"]:
        write_table(Path(args.markdown), table, MODEL_TABLE_BEGIN, MODEL_TABLE_END)
    else:
        write_table(Path(args.markdown), table)
    return 0 if all(r.get("kill") and r["kill"]["seconds"] <= meta["budget"] for r in results) else 1


def default_json(model):
    return str(ROOT / "bench" / "results" / ("mutation_model.json" if model else "mutation.json"))


def merge(args):
    runs = []
    for p in args.merge:
        try:
            runs.append(json.loads(Path(p).read_text()))
        except (OSError, ValueError) as e:
            print(f"mutation_test.py: --merge: cannot read {p}: {e}", file=sys.stderr)
            return 66
    if any(not isinstance(r, dict) or "meta" not in r for r in runs):
        print("mutation_test.py: --merge: a file is not a mutation_test.py --json result", file=sys.stderr)
        return 2
    keys = {(r["meta"]["budget"], r["meta"]["seed"], r["meta"].get("perturb", 0), bool(r["meta"].get("model")))
            for r in runs}
    if len(keys) != 1:
        print(f"--merge: the runs differ in budget, seed, perturbation or catalogue: {sorted(keys)}", file=sys.stderr)
        return 64
    # The runs say which catalogue they measured: the table's section and the default --json follow them.
    MODEL["on"] = bool(runs[0]["meta"].get("model"))
    if args.json_default:
        args.json = default_json(MODEL["on"])
    by_name = {}
    for run_ in runs:
        for r in run_["results"]:
            by_name[r["name"]] = dict(r, device=r.get("device", run_["meta"].get("device")))
    header = (ROOT / "kernel" / "include" / "flashcheck" /
              ("host_model.h" if MODEL["on"] else "mutants.h")).read_text()  # the catalogue's order
    results = sorted(by_name.values(), key=lambda r: header.find(f'"{r["name"]}"'))
    meta = dict(runs[0]["meta"])
    # Parts measured on different GPUs: the header names them all, each row keeps its own (device, in the JSON).
    devices = list(dict.fromkeys(r["device"] for r in by_name.values() if r.get("device")))
    if len(devices) == 1:
        meta["device"] = devices[0]
    elif len(devices) > 1:
        meta["device"] = "; ".join(f"{d} for {', '.join(r['name'] for r in results if r.get('device') == d)}"
                                   if d != devices[0] else d for d in devices)
    meta["args"] = ("--model " if MODEL["on"] else "") + f"--budget {meta['budget']:g} --seed {meta['seed']}" + (
        f" --perturb {meta['perturb']}" if meta.get("perturb") else "")
    meta["parts"] = [r["meta"]["args"] for r in runs]
    save_json(args.json, meta, results)
    return finish(args, meta, results)


def split_parts(names, n, json_path):
    """names in n parts of about equal expected time: each mutant's wall time in the last results at json_path
    (their median where a mutant has none), a race mutant's repeats and each run's replays on top; the longest
    first, each to the part with the least so far."""
    try:
        last = {r["name"]: r for r in json.loads(Path(json_path).read_text())["results"]}
    except (OSError, ValueError, KeyError):
        last = {}
    walls = sorted(r.get("wall_s", 0.0) for r in last.values()) or [10.0]
    median = walls[len(walls) // 2]

    def cost(name):
        r = last.get(name, {})
        return r.get("wall_s", median) + 12.0 + (45.0 if r.get("repeat_lines") else 0.0)

    parts, loads = [[] for _ in range(n)], [0.0] * n
    for name in sorted(names, key=cost, reverse=True):
        i = loads.index(min(loads))
        parts[i].append(name)
        loads[i] += cost(name)
    return [p for p in parts if p]


def run_parts(args, names):
    """--gpus N: this script once per part, at once, part i on GPU i, then --merge of the parts' results."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    gpus = visible.split(",") if visible else [str(i) for i in range(args.gpus)]
    if len(gpus) < args.gpus:
        print(f"--gpus {args.gpus}: CUDA_VISIBLE_DEVICES={visible} names {len(gpus)}", file=sys.stderr)
        return 64
    parts = split_parts(names, args.gpus, args.json)
    with tempfile.TemporaryDirectory(prefix="mutation-parts-") as tmp:
        procs, jsons = [], []
        for i, part in enumerate(parts):
            jsons.append(os.path.join(tmp, f"part{i}.json"))
            cmd = [sys.executable, str(Path(__file__).resolve()), "--build", args.build, "--budget", str(args.budget),
                   "--seed", str(args.seed), "--repeat", str(args.repeat), "--perturb", str(args.perturb),
                   "--only", ",".join(part), "--json", jsons[-1], "--markdown", os.path.join(tmp, f"part{i}.md")]
            print(f"[part {i}] GPU {gpus[i]}: {len(part)} mutants", flush=True)
            procs.append(subprocess.Popen(cmd + (["--model"] if args.model else []), stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True,
                                          env=dict(os.environ, CUDA_VISIBLE_DEVICES=gpus[i])))

        def relay(i, proc):  # a part's progress lines as they come (its own table and the rest go to its log)
            with open(os.path.join(tmp, f"part{i}.log"), "w") as log:
                for line in proc.stdout:
                    log.write(line)
                    if line.startswith("["):
                        print(f"[part {i}] {line}", end="", flush=True)

        relays = [threading.Thread(target=relay, args=(i, p)) for i, p in enumerate(procs)]
        for t in relays:
            t.start()
        codes = [p.wait() for p in procs]
        for t in relays:
            t.join()
        if not all(os.path.exists(j) for j in jsons):
            for i, code in enumerate(codes):
                if code != 0:
                    print(f"[part {i}] exit {code}; the end of its output:\n"
                          + Path(tmp, f"part{i}.log").read_text()[-4000:], file=sys.stderr)
            print("a part wrote no results", file=sys.stderr)
            return 1
        args.merge = jsons
        return merge(args)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=None,
                    help="a gpu-mutants build tree (default: build/gpu-mutants; with --model: build/ci)")
    ap.add_argument("--model", action="store_true",
                    help="the host model's planted defects in the CPU tier (properties_model), not kernel mutants")
    def seconds(text):
        value = float(text)
        if not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds above 0")
        return value

    ap.add_argument("--budget", type=seconds, default=60.0, help="seconds of the budgeted tier per mutant")
    ap.add_argument("--seed", type=int, default=0, help="FLASHCHECK_SEED of the budgeted runs")
    ap.add_argument("--only", default="", help="comma-separated mutant names (default: the whole catalogue)")
    ap.add_argument("--exclude", default="",
                    help="comma-separated mutant names to leave out (tc-offset-32bit: no case of the budgeted tier "
                         "is large enough; the huge case lines kill it, docs/mutation-testing.md)")
    ap.add_argument("--repeat", type=int, default=0, metavar="N",
                    help="rerun each killed race mutant's property N times on the failing chunk's cases")
    ap.add_argument("--perturb", type=int, default=0, metavar="SEED",
                    help="FLASHCHECK_PERTURB=SEED in every run: seeded delays at the pipelines' hand-offs")
    ap.add_argument("--markdown", default=str(ROOT / "docs" / "mutation-testing.md"))
    ap.add_argument("--json", default=None,
                    help="default: bench/results/mutation.json (with --model: bench/results/mutation_model.json)")
    ap.add_argument("--self-test", action="store_true", help="check the output parser and the table, then exit")
    ap.add_argument("--gpus", type=int, default=1, metavar="N",
                    help="split the selection into N parts run at once, part i on the i-th visible GPU "
                         "(CUDA_VISIBLE_DEVICES), each its own production run first, then one table (--merge)")
    ap.add_argument("--merge", nargs="+", metavar="JSON",
                    help="no run: join the results of runs over parts of the catalogue (the same budget, seed and "
                         "perturbation; a later file's result for a mutant wins) into --json and the table")
    args = ap.parse_args()
    MODEL["on"] = args.model
    args.json_default = args.json is None
    if args.json_default:
        args.json = default_json(args.model)
    if args.build is None:
        args.build = "build/ci" if args.model else "build/gpu-mutants"
    if args.self_test:
        return self_test()
    if args.merge:
        return merge(args)

    PERTURB["seed"] = args.perturb
    build = Path(args.build)
    tool = build / "tools" / "flashcheck-mutants"
    suite = "Model_Properties" if args.model else "Gpu_Properties"
    binary = build / "properties" / ("properties_model" if args.model else "properties_gpu")
    inst_binary = build / "properties" / "properties_gpu_instrumented"  # the model's suite has the traces itself
    repro = build / "tools" / "flashcheck-repro"
    for path in (tool, binary, repro):
        if not path.exists():
            hint = (f"cmake --preset ci && cmake --build {build}" if args.model
                    else "cmake --preset gpu-mutants && cmake --build --preset gpu-mutants")
            print(f"{path}: missing ({hint})", file=sys.stderr)
            return 66
    catalogue = json.loads(subprocess.run([str(tool), "--json"] + (["--model"] if args.model else []),
                                          stdout=subprocess.PIPE, text=True, check=True).stdout)
    if not catalogue["compiled_in"]:
        print(f"{build}: the mutants are not compiled in (configure with the preset gpu-mutants)", file=sys.stderr)
        return 64
    mutants = catalogue["mutants"]
    for flag, names, keep in (("--only", args.only, True), ("--exclude", args.exclude, False)):
        if not names:
            continue
        named = set(names.split(","))
        unknown = named - {m["name"] for m in mutants}
        if unknown:
            where = "the catalogue" if keep else "the catalogue's selection"
            print(f"{flag}: not in {where}: {', '.join(sorted(unknown))}", file=sys.stderr)
            return 64
        mutants = [m for m in mutants if (m["name"] in named) == keep]

    if args.gpus > 1:
        return run_parts(args, [m["name"] for m in mutants])

    # The production kernels (the model without a defect) must pass the same budgeted run first: a failure there
    # is a bug, not a kill.
    code, out, wall, cases = budgeted(binary, suite, "none", min(args.budget, 30.0), args.seed, args.budget + 300)
    print(f"[none] {'host model' if args.model else 'production kernels'}: exit {code}, {cases} cases in {wall:.1f} s",
          flush=True)
    production = {"cases": cases, "seconds": round(wall, 1),
                  "properties": {name: {"cases": int(n), "seconds": float(t)}
                                 for name, n, t in PROPERTY_LINE_RE.findall(out)}}
    if code != 0:
        print(out[-4000:])
        print("the production kernels fail the budgeted tier: fix that before measuring mutants", file=sys.stderr)
        return 1

    meta = {"budget": args.budget, "seed": args.seed, "perturb": args.perturb, "device": device_name(), "model": args.model,
            "args": " ".join(command_args(sys.argv[1:])),
            "production": production}
    results = []
    for m in mutants:
        r = dict(m)
        code, out, wall, cases = budgeted(binary, suite, m["name"], args.budget, args.seed, args.budget + 300)
        kill = parse_failure(out) if code not in (0, None) else None
        if kill and kill["seconds"] is None:
            kill["seconds"] = wall
        used = binary
        if code is None:
            r["note"] = f"hang (no result within {args.budget + 300:g} s)"
        elif code != 0 and kill is None:
            r["note"] = f"crash (exit {code}, no property failure reported)"
            r["output_tail"] = out[-2000:]
        if kill is None and code == 0 and not args.model and inst_binary.exists():
            code2, out2, wall2, cases2 = budgeted(inst_binary, suite, m["name"], args.budget / 10,
                                                  args.seed, args.budget + 300)
            cases += cases2
            kill = parse_failure(out2) if code2 not in (0, None) else None
            if kill:
                kill["seconds"] = (wall2 if kill["seconds"] is None else kill["seconds"]) + wall
                kill["binary_note"] = " (instrumented)" + kill.get("binary_note", "")
                used = inst_binary
        r["cases"] = cases
        r["wall_s"] = round(wall, 1)
        if kill:
            r["kill"] = kill
            if kill["case_line"]:
                r["case_line_replay"] = replay_case_line(repro, m["name"], kill["case_line"])
            if kill["reproduce"]:
                r["reproduce_replay"] = replay_string(used, suite, kill["property"], m["name"], kill["reproduce"])
            if args.repeat and m["bug_class"] == "race":
                r["repeat_lines"] = repeat_same_line(used, suite, kill, m["name"], args.repeat)
        results.append(r)
        status = f"killed by {kill['property']} at {kill['seconds']:.1f} s" if kill else r.get("note", "SURVIVED")
        print(f"[{m['name']}] {status}; {cases} cases; case line: {kill['case_line'] if kill else '-'}", flush=True)
        save_json(args.json, meta, results)
    return finish(args, meta, results)


if __name__ == "__main__":
    sys.exit(main())
