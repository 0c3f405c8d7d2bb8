#!/usr/bin/env python3
"""Sums the RapidCheck results of the property binaries in a verbose CTest log (ctest -V, any -j).

usage: classify_summary.py CTEST_VERBOSE_LOG [SUITE_PREFIX]   (default prefix: Gpu_Properties.)
Prints one line per property (cases passed, or FAILED) and the RC_CLASSIFY distribution over all of them,
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
    passed_re = re.compile(r"^OK, passed (\d+) tests")
    class_re = re.compile(r"^\s*([0-9.]+)% - (\".*\")$")
    tag_re = re.compile(r"\"([^\"]*)\"")
    results = []  # (property, cases or None, {label: percent})
    for lines in by_test.values():
        current, cases, classes = None, None, {}
        for line in lines + ["[ RUN      ] <end>"]:
            m = run_re.match(line)
            if m:
                if current and current.startswith(prefix):
                    results.append((current, cases, classes))
                current, cases, classes = m.group(1), None, {}
                continue
            m = passed_re.match(line)
            if m:
                cases = int(m.group(1))
                continue
            m = class_re.match(line)
            if m and cases is not None:
                for tag in tag_re.findall(m.group(2)):  # one line per combination of tags: add to each tag
                    classes[tag] = classes.get(tag, 0.0) + float(m.group(1))
        # a binary whose last test did not finish (crash) leaves `current` without a pass line: reported below

    if not results:
        print(f"no {prefix}* property results in {log_path}")
        sys.exit(1)
    total = 0
    weighted = collections.Counter()
    failed = []
    for name, cases, classes in sorted(results, key=lambda r: r[0]):
        if cases is None:
            failed.append(name)
            print(f"  {name}: FAILED (no 'OK, passed' line)")
            continue
        total += cases
        for label, pct in classes.items():
            weighted[label] += pct / 100.0 * cases
        print(f"  {name}: {cases} cases passed")
    print(f"{len(results)} properties, {total} cases passed, {len(failed)} failed")
    print("RC_CLASSIFY over all passed cases (per tag; a case has one value family and any of window, softcap, sink):")
    for label, n in weighted.most_common():
        print(f"  {100.0 * n / total:6.2f}%  {label}  (~{round(n)} cases)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
