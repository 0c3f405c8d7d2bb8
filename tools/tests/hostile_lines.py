#!/usr/bin/env python3
"""Hostile input never crashes or stalls a tool: every line of hostile.cases through flashcheck-repro --backend
model ends in its documented outcome (exit status and verdict word) within a second of CPU time and 100 MB of
memory, and the tools' own hostile arguments end in theirs:
  - FLASHCHECK_SUBJECT naming a missing library: flashcheck-repro and the property binary exit 78;
  - a directory given as a file of case lines: flashcheck-repro --file, flashcheck-report --cases and
    flashcheck-fuzz-decode exit 66;
  - a case-line file that does not parse: flashcheck-fuzz-decode exits 2 and decodes nothing (no other case);
  - a subject library named without a directory: it is the file in the working directory.

    hostile_lines.py CASES REPRO REPORT DECODE PROPERTIES_MODEL HOST_MODEL_SUBJECT
"""
import os
import shutil
import subprocess
import sys
import tempfile

CPU_SECONDS = 1.0
MAX_RSS_KB = 100 * 1024


def measured(cmd, env=None, cwd=None):
    """Like run, measuring the child alone: fork, exec, wait4."""
    full_env = dict(os.environ)
    full_env.pop("FLASHCHECK_SUBJECT", None)
    full_env.update(env or {})
    with tempfile.TemporaryFile() as log:
        pid = os.fork()
        if pid == 0:
            try:
                if cwd:
                    os.chdir(cwd)
                os.dup2(log.fileno(), 1)
                os.dup2(log.fileno(), 2)
                os.execve(cmd[0], cmd, full_env)
            finally:
                os._exit(127)
        _, status, usage = os.wait4(pid, 0)
        log.seek(0)
        text = log.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    return code, text, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def main():
    if len(sys.argv) != 7:
        print(__doc__, file=sys.stderr)
        return 2
    cases, repro, report, decode, properties, subject = sys.argv[1:]
    failures = 0

    def fail(what, text=""):
        nonlocal failures
        failures += 1
        print(f"FAIL: {what}")
        if text:
            print("  " + text.strip().replace("\n", "\n  ")[-2000:])

    lines = 0
    worst_cpu, worst_rss = 0.0, 0
    with open(cases) as f:
        for raw in f:
            raw = raw.strip()
            if not raw or raw.startswith("#"):
                continue
            expect, line = raw.split("|", 1)
            code_text, verdict = expect.split()
            line = line.strip()
            code, text, cpu, rss = measured([repro, "--backend", "model", line])
            lines += 1
            worst_cpu, worst_rss = max(worst_cpu, cpu), max(worst_rss, rss)
            if code != int(code_text) or f"verdict: {verdict}" not in text:
                fail(f"exit {code}, expected {code_text} {verdict}: {line}", text)
            elif cpu > CPU_SECONDS or rss > MAX_RSS_KB:
                fail(f"{cpu:.2f} s of CPU and {rss / 1024:.0f} MB, over {CPU_SECONDS} s and {MAX_RSS_KB // 1024} MB: {line}")
    print(f"{lines} hostile case lines in their outcomes; the worst took {worst_cpu:.2f} s of CPU and "
          f"{worst_rss / 1024:.0f} MB")

    valid = "f32 b=1 hq=2 hkv=1 sq=5 sk=7 d=8 mask=causal-br seed=1"
    missing = {"FLASHCHECK_SUBJECT": "/nonexistent/libnothing.so"}
    checks = [
        ("flashcheck-repro, FLASHCHECK_SUBJECT missing", [repro, valid], missing, 78),
        ("properties_model, FLASHCHECK_SUBJECT missing", [properties, "--gtest_filter=*.OracleAgreement"], missing, 78),
    ]
    work = tempfile.mkdtemp()
    try:
        checks += [
            ("flashcheck-repro --file DIRECTORY", [repro, "--backend", "model", "--file", work], None, 66),
            ("flashcheck-report --cases DIRECTORY", [report, "--backend", "model", "--cases", work], None, 66),
            ("flashcheck-fuzz-decode DIRECTORY", [decode, work], None, 66),
        ]
        typo = os.path.join(work, "typo.case")
        with open(typo, "w") as f:
            f.write("f32 b=-1 seed=1\n")
        checks.append(("flashcheck-fuzz-decode, a case line that does not parse", [decode, typo], None, 2))
        for what, cmd, env, want in checks:
            code, text, _, _ = measured(cmd, env)
            if code != want:
                fail(f"{what}: exit {code}, expected {want}", text)
            elif "decode" in what and "parse" in what and any(l.startswith(("f32", "f16", "bf16")) for l in text.splitlines()):
                fail(f"{what}: decoded the bytes into a case", text)
            else:
                print(f"ok: {what} (exit {code})")
        # A subject library named as a bare file name is the file in the working directory.
        shutil.copy(subject, os.path.join(work, "libmy_kernel.so"))
        code, text, _, _ = measured([repro, "--subject", "libmy_kernel.so", valid], cwd=work)
        if code != 0:
            fail(f"flashcheck-repro --subject libmy_kernel.so (no ./): exit {code}, expected 0", text)
        else:
            print("ok: flashcheck-repro --subject libmy_kernel.so (no ./) loads the file in the working directory")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS" if failures == 0 else f"{failures} failed")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
