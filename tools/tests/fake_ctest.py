#!/usr/bin/env python3
"""A stand-in for ctest in gpu_tier_pending_test.sh: four GPU tests, of which the first run of the selection passes
Gpu_Properties.A (a RapidCheck property), skips Gpu_Properties.B, stops Gpu_Properties.C at a timeout (as
--stop-time does) and never starts other.D. Later runs run what -R selects; C fails again on a check when
FAKE_CTEST_FAIL_AGAIN=1. Every run appends its selection to $FAKE_CTEST_STATE.runs, one line per run, and its arguments
to $FAKE_CTEST_STATE.args; a run of the sanitizer preset passes and runs nothing."""
import os
import re
import sys

TESTS = ["Gpu_Properties.A", "Gpu_Properties.B", "Gpu_Properties.C", "other.D"]


def main():
    args = sys.argv[1:]
    if "-N" in args:
        for i, name in enumerate(TESTS):
            print(f"  Test #{i + 1}: {name}")
        print(f"\nTotal Tests: {len(TESTS)}")
        return 0
    state = os.environ["FAKE_CTEST_STATE"]
    with open(state + ".args", "a") as f:
        f.write(" ".join(args) + "\n")
    if "sanitizer" in args:
        print("100% tests passed, 0 tests failed out of 0")
        return 0
    first = not os.path.exists(state + ".runs")
    regex = args[args.index("-R") + 1] if "-R" in args else None
    selected = [t for t in TESTS if regex is None or re.search(regex, t)]
    with open(state + ".runs", "a") as f:
        f.write(" ".join(selected) + "\n")
    cases, rc = [], 0
    for name in selected:
        n = TESTS.index(name) + 1
        if first and name == "other.D":
            continue  # not started before the stop time
        print(f'{n}: Test command: /build/properties/properties_gpu "--gtest_filter={name}"')
        print(f"{n}: [ RUN      ] {name}")
        if name == "Gpu_Properties.C" and (first or os.environ.get("FAKE_CTEST_FAIL_AGAIN") == "1"):
            message = "Timeout" if first else "Failed"
            if not first:
                print(f"{n}: [  FAILED  ] {name} (7 ms)")
            cases.append(f'<testcase name="{name}" status="fail"><failure message="{message}"/></testcase>')
            print(f"{n}/{len(selected)} Test #{n}: {name} ....***{message} 5.0 sec")
            rc = 8
            continue
        if name == "Gpu_Properties.B":
            print(f"{n}: flashcheck-skip: needs two GPUs")
            print(f"{n}: [  SKIPPED ] {name} (0 ms)")
            cases.append(f'<testcase name="{name}" status="notrun"><skipped message="x"/></testcase>')
            continue
        print(f"{n}: OK, passed 100 tests")
        print(f"{n}: [       OK ] {name} (5 ms)")
        cases.append(f'<testcase name="{name}" status="run"/>')
    with open(args[args.index("--output-junit") + 1], "w") as f:
        f.write("<testsuite>" + "".join(cases) + "</testsuite>\n")
    return rc


if __name__ == "__main__":
    sys.exit(main())
