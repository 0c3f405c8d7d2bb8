#!/usr/bin/env python3
"""The subject x dtype table: one Markdown table from flashcheck-report JSONs and property-run XMLs.

Each REPORT is what `flashcheck-report [--subject LIB] --json PATH` wrote (schema docs/report-json.md); its
subject (or "flashcheck" for --backend gpu/model) names a block of rows, one per dtype:
  cases run      cases that got a verdict (PASS, FAIL, OUTSIDE-DOMAIN)
  unsupported    cases outside the subject's capabilities (never counted as passes)
  failed         cases whose verdict is FAIL
  sequences      of the cases run, those of the inference path (seqs= or splits= in the case line: varlen, paged
                 K/V, split-KV; a subject gets them where it declares fc_subject_sequences_v1): run / failed
  backward       the backward section's grad=1 cases (a subject gets them where it declares fc_subject_backward_v1):
                 run / failed (those its backward declined, UNSUPPORTED, left out), "-" where none ran
  dropout        of the cases run (the forward section), those with a dropout (dropout= in the case line; a subject
                 gets them where it declares fc_subject_dropout_v1 for the dtype): run / failed; the grad=1 ones count
                 in backward
  worst O, LSE   worst error / bound over the cases run (fail above 1); "-" where nothing was judged, "no LSE"
                 where the subject writes none
--properties NAME=XML adds the property tier's totals for subject NAME (the GoogleTest XML of
`properties_gpu --gtest_output=xml:XML`): properties passed / failed / skipped. --known NAME=TEXT adds a note
under the table (a known peer deviation, with the finding that replays it).

Exit status: 0 done, 2 usage error, 65 a file is not what it should be, 66 a file cannot be read.
"""
import argparse
import json
import math
import sys
import xml.etree.ElementTree as ElementTree

SCHEMA_PREFIX = "flashcheck-report/"
DTYPE_ORDER = ("f32", "f16", "bf16", "f8e4m3")
RAN = ("PASS", "FAIL", "OUTSIDE-DOMAIN")


class InputError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="subject_table.py", description=__doc__.split("\n\n")[0],
        epilog="example: tools/subject_table.py flashcheck.json sdpa-flash.json "
               "--properties sdpa-flash=sdpa-flash.xml > subjects.md")
    parser.add_argument("reports", nargs="+", metavar="REPORT", help="flashcheck-report --json output")
    parser.add_argument("--properties", action="append", default=[], metavar="NAME=XML",
                        help="GoogleTest XML of the property binary run on subject NAME (repeatable)")
    parser.add_argument("--known", action="append", default=[], metavar="NAME=TEXT",
                        help="a note under the table for subject NAME (repeatable)")
    return parser.parse_intermixed_args(argv)


def split_pair(text, option):
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise InputError(2, f"{option}: expected NAME=VALUE, got {text!r}")
    return name, value


def load_report(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise InputError(66, f"{path}: cannot read: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise InputError(65, f"{path}: not JSON: {e}") from e
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith(SCHEMA_PREFIX):
        raise InputError(65, f"{path}: schema: not a flashcheck-report JSON")
    return doc


def property_totals(path):
    """(passed, failed, skipped) test counts of a GoogleTest XML."""
    try:
        root = ElementTree.parse(path).getroot()
    except OSError as e:
        raise InputError(66, f"{path}: cannot read: {e.strerror}") from e
    except ElementTree.ParseError as e:
        raise InputError(65, f"{path}: not XML: {e}") from e
    passed = failed = skipped = 0
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None or case.get("result") == "skipped" or case.get("status") == "notrun":
            skipped += 1
        else:
            passed += 1
    if passed + failed + skipped == 0:
        raise InputError(65, f"{path}: no testcase elements: not a GoogleTest XML")
    return passed, failed, skipped


def ratio_text(value, judged):
    if not judged:
        return "-"
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "non-finite"
    return f"{value:.3f}"


def rows(doc):
    """One row per dtype that has cases: (dtype, run, unsupported, failed, sequences, backward, dropout, worst O,
    worst LSE)."""
    per_dtype = {}
    for case in doc.get("cases", []):
        line = case.get("case") or ""
        dtype = line.split()[0] if line else "?"
        run, unsupported, failed, seq_run, seq_failed, drop_run, drop_failed = per_dtype.get(dtype, (0,) * 7)
        outcome = case.get("outcome")
        words = line.split()
        sequence = any(word.startswith(("seqs=", "splits=")) for word in words)
        dropout = any(word.startswith("dropout=") for word in words)
        per_dtype[dtype] = (run + (outcome in RAN), unsupported + (outcome == "UNSUPPORTED"),
                            failed + (outcome == "FAIL"), seq_run + (sequence and outcome in RAN),
                            seq_failed + (sequence and outcome == "FAIL"), drop_run + (dropout and outcome in RAN),
                            drop_failed + (dropout and outcome == "FAIL"))
    worst = {d["dtype"]: d for d in doc.get("dtypes", [])}
    backward = doc.get("backward", {})
    lse_written = doc.get("lse_written", True)
    out = []
    for dtype in sorted(per_dtype, key=lambda d: DTYPE_ORDER.index(d) if d in DTYPE_ORDER else 99):
        run, unsupported, failed, seq_run, seq_failed, drop_run, drop_failed = per_dtype[dtype]
        w = worst.get(dtype, {})
        lse = ratio_text(w.get("worst_lse_ratio"), run > 0) if lse_written else ("no LSE" if run else "-")
        b = backward.get(dtype)
        grad = (f"{b.get('cases', 0) - b.get('unsupported', 0)} / {b.get('failures', 0)}" if isinstance(b, dict)
                else "-")
        out.append((dtype, run, unsupported, failed, f"{seq_run} / {seq_failed}", grad, f"{drop_run} / {drop_failed}",
                    ratio_text(w.get("worst_o_ratio"), run > 0), lse))
    return out


def table(reports, properties, known):
    lines = ["| subject | dtype | cases run | unsupported | failed | sequences run / failed | backward run / failed "
             "| dropout run / failed | worst O err/bound | worst LSE err/bound | properties passed / failed / skipped |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for doc in reports:
        name = doc.get("subject") or "flashcheck"
        props = properties.get(name)
        prop_text = "/".join(str(n) for n in props) if props else "not run"
        not_run = doc.get("counts", {}).get("not_run", 0)
        for i, (dtype, run, unsupported, failed, sequences, grad, dropout, o, lse) in enumerate(rows(doc)):
            if i == 0 and not_run:
                stop = doc.get("interrupted_by")
                failed = (f"{failed} (stopped by {stop}: {not_run} cases not run)" if stop else
                          f"{failed} (then the CUDA context was lost: {not_run} cases not run)")
            lines.append(f"| {name if i == 0 else ''} | {dtype} | {run} | {unsupported} | {failed} | {sequences} "
                         f"| {grad} | {dropout} | {o} | {lse} | {prop_text if i == 0 else ''} |")
    for name, text in known:
        lines.append("")
        lines.append(f"- **{name}**: {text}")
    return "\n".join(lines) + "\n"


def main(argv):
    args = parse_args(argv)
    try:
        reports = [load_report(p) for p in args.reports]
        properties = {}
        for item in args.properties:
            name, path = split_pair(item, "--properties")
            properties[name] = property_totals(path)
        known = [split_pair(item, "--known") for item in args.known]
    except InputError as e:
        print(f"subject_table.py: {e}", file=sys.stderr)
        return e.status
    sys.stdout.write(table(reports, properties, known))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
