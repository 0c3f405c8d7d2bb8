#!/usr/bin/env python3
"""Sums the RapidCheck results of the property binaries in a verbose CTest log (ctest -V, any -j).

usage: classify_summary.py CTEST_VERBOSE_LOG [SUITE_PREFIX]   (default prefix: Gpu_Properties.)
Prints one line per property run (cases passed, skipped with its reason, FAILED, or did not finish), named by its
binary and, for a subject, the subject's library; then the RC_CLASSIFY distribution over the passed runs,
weighted by each property's case count, per tag: a case carries its value family and any of the features
window, softcap and sink, so the features' shares add to the families' 100%. CTest -V prefixes every line of
test N with "N: "; lines are grouped by that prefix so parallel tests do not mix.
"""
import argparse
import collections
import re
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", metavar="CTEST_VERBOSE_LOG", help="the output of ctest -V")
    parser.add_argument("prefix", metavar="SUITE_PREFIX", nargs="?", default="Gpu_Properties.",
                        help="the property suite to sum (default: %(default)s)")
    args = parser.parse_args()
    log_path, prefix = args.log, args.prefix
    try:
        log = open(log_path, errors="replace")
    except OSError as e:
        parser.error(f"cannot read {log_path}: {e.strerror}")
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
    skip_reason_re = re.compile(r"flashcheck-skip: (.*)$")
    passed_re = re.compile(r"^OK, passed (\d+) tests")
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
        where = binary + subject
        current, outcome, reason, classes = None, None, "", {}
        for line in lines + ["[ RUN      ] <end>"]:
            m = run_re.match(line)
            if m:
                if current and current.startswith(prefix):
                    results.append((current, where, outcome, classes))
                current, outcome, reason, classes = m.group(1), None, "", {}
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

    if not results:
        print(f"no {prefix}* property results in {log_path}")
        sys.exit(1)
    total = 0
    weighted = collections.Counter()
    failed, skipped = [], 0
    for name, where, outcome, classes in sorted(results, key=lambda r: (r[0], r[1])):
        if isinstance(outcome, int):
            total += outcome
            for label, pct in classes.items():
                weighted[label] += pct / 100.0 * outcome
            print(f"  {name} [{where}]: {outcome} cases passed")
        elif outcome is not None and outcome.startswith("skipped"):
            skipped += 1
            print(f"  {name} [{where}]: {outcome}")
        else:
            failed.append(name)
            print(f"  {name} [{where}]: {outcome or 'did not finish'}")
    print(f"{len(results)} property runs, {total} cases passed, {skipped} skipped, {len(failed)} failed or unfinished")
    print("RC_CLASSIFY over all passed cases (per tag; a case has one value family and any of window, softcap, sink):")
    for label, n in weighted.most_common():
        print(f"  {100.0 * n / total:6.2f}%  {label}  (~{round(n)} cases)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
