#!/usr/bin/env python3
"""Sums the RapidCheck results of the property binaries in verbose CTest logs (ctest -V, any -j).

usage: classify_summary.py [--prefix SUITE_PREFIX] CTEST_VERBOSE_LOG...   (default prefix: Gpu_Properties.)
Several logs are one run in parts (say ctest --rerun-failed after the first): a property run found in a later log
replaces the same run (property, binary, subject, budget) of an earlier one.
Prints one line per property run (cases passed, skipped with its reason, FAILED, or did not finish), named by its
binary and, for a subject, the subject's library; a test that passes without a RapidCheck count (the budgeted
tier's run, or a test of fixed cases) is listed with the cases its [ BUDGET ] or [ COVERAGE ] lines report; then the
RC_CLASSIFY distribution over the passed runs, weighted by each property's case count, per tag: a case carries its
value family and any of the features window, softcap and sink, so the features' shares add to the families' 100%.
CTest -V prefixes every line of test N with "N: "; lines are grouped by that prefix so parallel tests do not mix.
"""
import argparse
import collections
import re
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logs", metavar="CTEST_VERBOSE_LOG", nargs="+", help="the output of ctest -V")
    parser.add_argument("--prefix", metavar="SUITE_PREFIX", default="Gpu_Properties.",
                        help="the property suite to sum (default: %(default)s)")
    args = parser.parse_args()
    prefix = args.prefix
    merged = {}  # (property, where) -> (property, where, outcome, classes); a later log's run replaces an earlier one
    for log_path in args.logs:
        try:
            log = open(log_path, errors="replace")
        except OSError as e:
            parser.error(f"cannot read {log_path}: {e.strerror}")
        with log:
            for run in parse_log(log, prefix):
                merged[(run[0], run[1])] = run
    summarize(list(merged.values()), prefix, ", ".join(args.logs))


def parse_log(log, prefix):
    """The property runs of one verbose CTest log: (property, where, outcome, {label: percent})."""
    by_test = collections.defaultdict(list)
    for line in log:
        m = re.match(r"^(\d+): (.*)$", line.rstrip("\n"))
        if m:
            by_test[m.group(1)].append(m.group(2))

    run_re = re.compile(r"^\[ RUN      \] (\S+)")
    skipped_re = re.compile(r"^\[  SKIPPED \] (\S+) \(\d+ ms\)")
    failed_re = re.compile(r"^\[  FAILED  \] (\S+) \(\d+ ms\)")
    command_re = re.compile(r"^Test command: (\S+)(.*)$")
    executable_re = re.compile(r'TEST_EXECUTABLE=([^"\s]+)')
    subject_re = re.compile(r"^\s+FLASHCHECK_SUBJECT=(\S+)")
    budget_env_re = re.compile(r"^\s+FLASHCHECK_BUDGET=(\S+)")
    skip_reason_re = re.compile(r"flashcheck-skip: (.*)$")
    passed_re = re.compile(r"^OK, passed (\d+) tests")
    ok_re = re.compile(r"^\[       OK \] (\S+) \(\d+ ms\)")
    budget_re = re.compile(r"^\[ BUDGET   \] \S+ +(\d+) cases in")
    case_runs_re = re.compile(r"^\[ COVERAGE \] (\S+): (\d+) case runs?$")
    class_re = re.compile(r"^\s*([0-9.]+)% - (\".*\")$")
    tag_re = re.compile(r"\"([^\"]*)\"")
    results = []  # (property, where, outcome: cases passed (int), "skipped: ...", "FAILED" or None, {label: percent})
    for lines in by_test.values():
        binary, subject = "?", ""
        for line in lines:
            m = command_re.match(line)
            if m:
                e = executable_re.search(m.group(2))
                binary = (e.group(1) if e else m.group(1)).rsplit("/", 1)[-1]
            m = subject_re.match(line)
            if m:
                subject = " subject=" + m.group(1).rsplit("/", 1)[-1]
            m = budget_env_re.match(line)
            if m:
                subject += " budget=" + m.group(1)
        where = binary + subject
        current, outcome, reason, classes = None, None, "", {}
        budget, case_runs = [], None  # the budgeted tier's per-property cases; a fixed-case test's case runs
        for line in lines + ["[ RUN      ] <end>"]:
            m = run_re.match(line)
            if m:
                if current and current.startswith(prefix):
                    results.append((current, where, outcome, classes))
                current, outcome, reason, classes = m.group(1), None, "", {}
                budget, case_runs = [], None
                continue
            m = budget_re.match(line)
            if m:
                budget.append(int(m.group(1)))
                continue
            m = case_runs_re.match(line)
            if m and m.group(1) == current:
                case_runs = int(m.group(2))
                continue
            m = ok_re.match(line)
            if m and m.group(1) == current and outcome is None:
                if budget:
                    outcome = f"passed: budgeted tier, {sum(budget)} cases over {len(budget)} properties"
                elif case_runs is not None:
                    outcome = f"passed: {case_runs} fixed case run{'' if case_runs == 1 else 's'}"
                else:
                    outcome = "passed"
                continue
            m = passed_re.match(line)
            if m:
                outcome = int(m.group(1))
                continue
            m = skip_reason_re.search(line)
            if m and current:
                reason = m.group(1)
            m = skipped_re.match(line)
            if m and m.group(1) == current:
                outcome = "skipped: " + (reason or "no reason printed")
                continue
            m = failed_re.match(line)
            if m and m.group(1) == current:
                outcome = "FAILED"
                continue
            m = class_re.match(line)
            if m and isinstance(outcome, int):
                for tag in tag_re.findall(m.group(2)):  # one line per combination of tags: add to each tag
                    classes[tag] = classes.get(tag, 0.0) + float(m.group(1))
        # a binary whose last test did not finish (crash) leaves `current` without a pass line: reported below
    return results


def summarize(results, prefix, where_from):
    if not results:
        print(f"no {prefix}* property results in {where_from}")
        sys.exit(1)
    total = 0
    weighted = collections.Counter()
    failed, skipped, other_passed = [], 0, 0
    for name, where, outcome, classes in sorted(results, key=lambda r: (r[0], r[1])):
        if isinstance(outcome, int):
            total += outcome
            for label, pct in classes.items():
                weighted[label] += pct / 100.0 * outcome
            print(f"  {name} [{where}]: {outcome} cases passed")
        elif outcome is not None and outcome.startswith("passed"):
            other_passed += 1
            print(f"  {name} [{where}]: {outcome}")
        elif outcome is not None and outcome.startswith("skipped"):
            skipped += 1
            print(f"  {name} [{where}]: {outcome}")
        else:
            failed.append(name)
            print(f"  {name} [{where}]: {outcome or 'did not finish'}")
    print(f"{len(results)} property runs, {total} cases passed, "
          f"{other_passed} other runs passed (budgeted or fixed cases), {skipped} skipped, "
          f"{len(failed)} failed or unfinished")
    print("RC_CLASSIFY over all passed cases (per tag; a case has one value family and any of window, softcap, sink):")
    for label, n in weighted.most_common():
        print(f"  {100.0 * n / total:6.2f}%  {label}  (~{round(n)} cases)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
