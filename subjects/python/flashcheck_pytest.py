"""flashcheck for test suites run by pytest: the suite's cases and properties as pytest items, for a kernel written in
Python (a python:MODULE:FUNCTION subject, flashcheck/python_bridge.h) or a subject library.

A thin layer over flashcheck's own tools: flashcheck-report draws and judges the cases (the tile sweep and seeded
random cases, moved inside the subject's declared capabilities), properties_model runs the property tier; this module
turns each case and each property into a pytest item, and a failure into its case line and the flashcheck-repro
command that replays it. Load it as a plugin (`-p flashcheck_pytest`, or `pytest_plugins = ["flashcheck_pytest"]`
in a conftest.py) and mark a test module:

    import pytest
    import flashcheck_pytest

    pytestmark = pytest.mark.flashcheck(subject="python:my_kernels:attention", random=8, cases=20)

    def test_case(flashcheck_case):          # one item per case of the report's sweep
        flashcheck_pytest.check(flashcheck_case)

    def test_property(flashcheck_property):  # one item per property of the property tier
        flashcheck_pytest.check(flashcheck_property)

Where the tools are: --flashcheck-build DIR (or FLASHCHECK_BUILD), a build tree holding tools/flashcheck-report,
tools/flashcheck-repro and properties/properties_model (and properties/properties_gpu, for a subject in device memory,
in a build with CUDA). A case outside the subject's capabilities, and a property that
does not apply to it, is a skip with flashcheck's reason; never a pass.
"""
import dataclasses
import json
import os
import re
import shlex
import subprocess
import tempfile
import xml.etree.ElementTree as ElementTree

import pytest


@dataclasses.dataclass(frozen=True)
class Result:
    """One case or property as flashcheck judged it: outcome PASS, FAIL, UNSUPPORTED, SKIP, ..."""
    name: str
    outcome: str
    subject: str
    case_line: str = ""
    detail: str = ""
    repro: str = ""


def _build_dir(config):
    build = config.getoption("flashcheck_build") or os.environ.get("FLASHCHECK_BUILD", "")
    if not build:
        raise pytest.UsageError("flashcheck: --flashcheck-build DIR or FLASHCHECK_BUILD names the build tree")
    return build


def _tool(build, *parts):
    path = os.path.join(build, *parts)
    if not os.access(path, os.X_OK):
        raise pytest.UsageError(f"flashcheck: {path} is not an executable (build the ci or gpu preset first)")
    return path


def repro_command(subject, case_line):
    """The command that replays `case_line` on `subject`."""
    return f"flashcheck-repro --subject {shlex.quote(subject)} {shlex.quote(case_line)}"


def report_results(build, subject, random=8, seed=None, timeout=3600):
    """Every case of flashcheck-report's forward sweep on `subject`, judged (the report's JSON, docs/report-json.md)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "report.json")
        command = [_tool(build, "tools", "flashcheck-report"), "--subject", subject, "--random", str(random),
                   "--random-features", str(random), "--random-sequences", str(random), "--random-dv", str(random),
                   "--random-dropout", str(random), "--backward", "0", "--json", out]
        if seed is not None:
            command += ["--seed", str(seed)]
        run = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if not os.path.exists(out):
            raise RuntimeError(f"flashcheck-report exited {run.returncode} without a report:\n{run.stderr[-2000:]}")
        with open(out, encoding="utf-8") as f:
            doc = json.load(f)
    results = []
    for case in doc.get("cases", []):
        line = case.get("case", "")
        results.append(Result(name=line, outcome=case.get("outcome", "?"), subject=subject, case_line=line,
                              detail=case.get("reason", "") or "; ".join(case.get("failures", [])),
                              repro=repro_command(subject, line)))
    return results


_FALSIFIED = re.compile(r"\[ FALSIFIED\] .*?: case line: (.*)$", re.M)
_REPRODUCE = re.compile(r'RC_PARAMS="(reproduce=[^"]+)"')


_DEVICE_SUBJECT = "FLASHCHECK_SUBJECT takes device memory"


def _run_properties(build, binary, subject, cases, timeout, tmp):
    xml_path = os.path.join(tmp, f"{binary}.xml")
    env = dict(os.environ, FLASHCHECK_SUBJECT=subject, FLASHCHECK_CASES=str(cases))
    run = subprocess.run([_tool(build, "properties", binary), f"--gtest_output=xml:{xml_path}"],
                         capture_output=True, text=True, timeout=timeout, env=env)
    if not os.path.exists(xml_path):
        raise RuntimeError(f"{binary} exited {run.returncode} without results:\n{run.stderr[-2000:]}")
    return run, ElementTree.parse(xml_path).getroot()


def property_results(build, subject, cases=20, timeout=3600):
    """Every property of the property tier on `subject` (FLASHCHECK_SUBJECT), each with the case line it was
    falsified on: properties_model for a subject in host memory, properties_gpu (the GPU tier's binary, in a build
    with CUDA) for one in device memory."""
    with tempfile.TemporaryDirectory() as tmp:
        run = None
        if os.access(os.path.join(build, "properties", "properties_model"), os.X_OK):
            run, root = _run_properties(build, "properties_model", subject, cases, timeout, tmp)
        if run is None or _DEVICE_SUBJECT in run.stdout + run.stderr:  # a build of properties_gpu alone goes there
            run, root = _run_properties(build, "properties_gpu", subject, cases, timeout, tmp)
    falsified = {}
    for block in run.stdout.split("[ RUN      ] ")[1:]:
        name = block.split("\n", 1)[0].strip()
        match = _FALSIFIED.search(block)
        if match:
            reproduce = _REPRODUCE.search(block)
            falsified[name] = (match.group(1).strip(), reproduce.group(1) if reproduce else "")
    results = []
    for case in root.iter("testcase"):
        name = f"{case.get('classname')}.{case.get('name')}"
        failure = case.find("failure")
        skipped = case.find("skipped")
        if failure is not None:
            line, reproduce = falsified.get(name, ("", ""))
            detail = (failure.get("message") or "")[:4000]
            if reproduce:
                detail += f"\nRapidCheck: RC_PARAMS=\"{reproduce}\""
            results.append(Result(name=case.get("name"), outcome="FAIL", subject=subject, case_line=line,
                                  detail=detail, repro=repro_command(subject, line) if line else ""))
        elif skipped is not None or case.get("result") == "skipped":
            results.append(Result(name=case.get("name"), outcome="SKIP", subject=subject,
                                  detail=(skipped.get("message") if skipped is not None else "") or "skipped"))
        else:
            results.append(Result(name=case.get("name"), outcome="PASS", subject=subject))
    return results


def check(result):
    """Passes, skips (outside the subject's capabilities, a property that does not apply, or a case outside the error
    model's domain, where nothing is claimed and the report counts no failure) or fails with the case line and the
    command that replays it."""
    if result.outcome == "PASS":
        return
    if result.outcome in ("UNSUPPORTED", "SKIP", "OUTSIDE-DOMAIN"):
        pytest.skip(f"flashcheck: {result.outcome}: {result.detail or 'nothing claimed'}")
    message = [f"flashcheck: {result.outcome}: {result.name}"]
    if result.case_line:
        message.append(f"case line: {result.case_line}")
    if result.repro:
        message.append(f"replay: {result.repro}")
    if result.detail:
        message.append(result.detail)
    pytest.fail("\n".join(message), pytrace=False)


# ---- the plugin -------------------------------------------------------------------------------------------------

def pytest_addoption(parser):
    parser.addoption("--flashcheck-build", dest="flashcheck_build", default=None,
                     help="flashcheck's build tree (tools/ and properties/); default $FLASHCHECK_BUILD")


def pytest_configure(config):
    config.addinivalue_line("markers", "flashcheck(subject, random=8, seed=None, cases=20): the flashcheck subject a "
                                       "module's flashcheck_case and flashcheck_property items run on")


_cache = {}


def pytest_generate_tests(metafunc):
    wanted = [f for f in ("flashcheck_case", "flashcheck_property") if f in metafunc.fixturenames]
    if not wanted:
        return
    marker = metafunc.definition.get_closest_marker("flashcheck")
    if marker is None or "subject" not in marker.kwargs:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: mark it pytest.mark.flashcheck(subject=...)")
    options = dict(marker.kwargs)
    build = _build_dir(metafunc.config)
    subject = options["subject"]
    for fixture in wanted:
        if fixture == "flashcheck_case":
            key = ("case", build, subject, options.get("random", 8), options.get("seed"))
            if key not in _cache:
                _cache[key] = report_results(build, subject, random=key[3], seed=key[4])
        else:
            key = ("property", build, subject, options.get("cases", 20))
            if key not in _cache:
                _cache[key] = property_results(build, subject, cases=key[3])
        results = _cache[key]
        metafunc.parametrize(fixture, results, ids=[r.name for r in results])
