#!/usr/bin/env python3
"""Lists the tests of a CTest selection that have not passed yet, from the selection's listing and the JUnit XML of
the runs so far (ctest --output-junit FILE, one file per run, oldest first).

usage: pending_tests.py --listing CTEST_N_OUTPUT [--regex] JUNIT_XML...
A test is done once a run passed or skipped it; it is pending when no run started it (ctest --stop-time), or every
run that did stopped it at its timeout, failed it or could not run it. ci/gpu_tier.sh counts the pending tests of its
`tests` step and runs them with `tests-pending`, so a GPU tier split over calls of limited length runs every test.
Prints one name per line in the listing's order, or with --regex one anchored CTest -R expression (empty when
none is pending). Exit status 0, 2 on a missing or bad file.
"""
import argparse
import collections
import re
import sys
import xml.etree.ElementTree as ET


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listing", required=True, metavar="CTEST_N_OUTPUT",
                        help="the output of ctest -N over the selection (lines 'Test #N: name')")
    parser.add_argument("--regex", action="store_true", help="print one anchored -R expression instead of names")
    parser.add_argument("junit", metavar="JUNIT_XML", nargs="*", help="the runs' ctest --output-junit files")
    args = parser.parse_args()
    try:
        with open(args.listing, errors="replace") as f:
            listing = [m.group(1) for m in (re.search(r"Test +#\d+: (\S+)", line) for line in f) if m]
    except OSError as e:
        print(f"pending_tests.py: cannot read {args.listing}: {e.strerror}", file=sys.stderr)
        return 2
    done = collections.Counter()  # passes and skips per name (two binaries may register the same test name)
    for path in args.junit:
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError) as e:
            print(f"pending_tests.py: cannot read {path}: {e}", file=sys.stderr)
            return 2
        for case in root.iter("testcase"):
            skipped = case.find("skipped") is not None
            passed = case.get("status") == "run" and case.find("failure") is None and case.find("error") is None
            if skipped or passed:
                done[case.get("name", "")] += 1
    occurrences = collections.Counter(listing)
    pending = [name for name in occurrences if done[name] < occurrences[name]]
    if args.regex:
        print("^(" + "|".join(re.escape(name) for name in pending) + ")$" if pending else "")
    else:
        for name in pending:
            print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
