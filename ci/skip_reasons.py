#!/usr/bin/env python3
"""Lists the tests CTest skipped, each with its reason, from CTest's JUnit XML (ctest --output-junit FILE).

CTest's own summary names skipped tests without the reason, which only its -V output carries; ci/test.sh and
ci/gpu_tier.sh run this after ctest so the reason is visible in the default output. The reason is the test's
"flashcheck-skip: ..." line, else GoogleTest's message after "Skipped", else the last line of its output.
Lines are cut to 200 characters. Exit status 0 (listing skips is not a verdict), 2 on a missing or bad file.
"""
import argparse
import re
import sys
import xml.etree.ElementTree as ET

MAX_LINE = 200


def reason_of(output):
    lines = [l.strip() for l in output.splitlines() if l.strip()]
    for line in lines:
        m = re.search(r"flashcheck-skip: (.*)", line)
        if m:
            return m.group(1)
    for i, line in enumerate(lines):
        if line.endswith(": Skipped") and i + 1 < len(lines):
            return lines[i + 1]
    return lines[-1] if lines else "(no output)"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("junit", metavar="JUNIT_XML", help="the file ctest --output-junit wrote")
    args = parser.parse_args()
    try:
        root = ET.parse(args.junit).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"skip_reasons.py: cannot read {args.junit}: {e}", file=sys.stderr)
        return 2
    skipped = []
    for case in root.iter("testcase"):
        if case.find("skipped") is None and case.get("status") not in ("notrun", "disabled"):
            continue
        out = case.find("system-out")
        skip = case.find("skipped")
        text = (out.text if out is not None and out.text else "") or (skip.get("message", "") if skip is not None else "")
        skipped.append((case.get("name", "?"), reason_of(text)))
    if not skipped:
        return 0
    print(f"{len(skipped)} tests skipped:")
    for name, reason in skipped:
        line = f"  {name}: {reason}"
        print(line if len(line) <= MAX_LINE else line[: MAX_LINE - 3] + "...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
