"""The benchmark scripts' shared command line (bench/bench_cli.py), checked without a GPU (ctest bench_cli, label cpu).

Every script: --help exits 0; an unknown --only section and a partial run into bench/results are refused with exit 2
and the argument named, before PyTorch or a device is needed, and bench/results is left as it was. bench/run_bench.sh
refuses the same before it builds anything. The seed workload then runs for real on the host model (--only verify, two small cases) into a scratch --out: its JSON records the
sections, the timing mode and the command line, and bench/results is untouched.
usage: python3 bench_cli_test.py FLASHCHECK_REPORT
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import unittest

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(BENCH, "results")
SCRIPTS = {  # script: (a partial run's arguments, a section it has)
    "side_by_side.py": (["--only", "heads"], "throughput"),
    "decode_bench.py": (["--only", "varlen"], "decode"),
    "features_bench.py": (["--quick"], "accuracy"),
    "peers_backward.py": (["--only", "cudnn,flash"], "efficient"),
    "seed_workload.py": (["--case", "320,128,32"], "verify"),
}
REPORT = None


def run(script, *args):
    return subprocess.run([sys.executable, os.path.join(BENCH, script), *args], capture_output=True, text=True,
                          timeout=600)


def fingerprint(folder):
    """Every file of `folder` with its size and digest: what a run must leave as it was."""
    out = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
    return out


class BenchCli(unittest.TestCase):
    def setUp(self):
        self.before = fingerprint(RESULTS)

    def tearDown(self):
        self.assertEqual(fingerprint(RESULTS), self.before, "bench/results changed")

    def test_help(self):
        for script in SCRIPTS:
            r = run(script, "--help")
            self.assertEqual(r.returncode, 0, f"{script} --help: {r.stderr}")
            for flag in ("--out", "--only", "--timing"):
                self.assertIn(flag, r.stdout, f"{script} --help names {flag}")

    def test_unknown_section_is_refused_by_name(self):
        for script, (_, section) in SCRIPTS.items():
            r = run(script, "--only", f"{section},warp-drive")
            self.assertEqual(r.returncode, 2, f"{script}: {r.stderr}")
            self.assertIn("--only: unknown section(s) warp-drive", r.stderr, script)

    def test_partial_run_into_results_is_refused(self):
        for script, (partial, _) in SCRIPTS.items():
            r = run(script, *partial, "--out", RESULTS)
            self.assertEqual(r.returncode, 2, f"{script}: {r.stderr}")
            self.assertIn("--out: bench/results holds one whole result set", r.stderr, script)

    def test_bad_timing_mode_is_refused(self):
        for script in SCRIPTS:
            r = run(script, "--timing", "eventually")
            self.assertEqual(r.returncode, 2, script)
            self.assertIn("--timing", r.stderr, script)

    def test_run_bench_refuses_before_building(self):
        script = os.path.join(BENCH, "run_bench.sh")
        with tempfile.TemporaryDirectory() as build:
            for args, message in ((["--only", "forward,warp-drive"], "--only: unknown section warp-drive"),
                                  (["--quick"], "bench/results holds one whole result set"),
                                  (["--only", "decode"], "bench/results holds one whole result set"),
                                  (["--fast"], "unknown argument --fast")):
                r = subprocess.run(["bash", script, build, RESULTS, *args], capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 2, f"{args}: {r.stderr}")
                self.assertIn(message, r.stderr, args)
                self.assertEqual(os.listdir(build), [], f"{args}: nothing built")

    def test_seed_workload_records_how_it_ran(self):
        with tempfile.TemporaryDirectory() as out:
            r = run("seed_workload.py", "--backend", "model", "--report", REPORT, "--case", "320,128,32",
                    "--case", "160,128,64", "--only", "verify", "--jobs", "2", "--out", out)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual(sorted(os.listdir(out)), ["seed_workload.json", "seed_workload.md"])
            with open(os.path.join(out, "seed_workload.json")) as f:
                result = json.load(f)
            meta = result["meta"]
            self.assertEqual(meta["sections"], ["verify"])
            self.assertEqual(meta["timing"], "sync")
            self.assertIn("--only verify", meta["command"])
            self.assertEqual(meta["timing_skipped"], "--only verify")
            self.assertEqual([c["verdict"]["outcome"] for c in result["cases"]], ["PASS", "PASS"])
            with open(os.path.join(out, "seed_workload.md")) as f:
                self.assertIn("Timing: sync; sections: verify;", f.read())


if __name__ == "__main__":
    REPORT = sys.argv.pop(1)
    unittest.main(verbosity=2)
