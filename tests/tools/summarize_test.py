#!/usr/bin/env python3
"""Tests of tools/dev/summarize.py, the script that prints CI's last line.

Each case builds a meson-logs directory by hand (testlog.json: one JSON
object per meson test; testlog.junit.xml: GoogleTest's cases) and a
run_checks.sh results file, runs the script as CI does, and checks its
last line and exit status. run_checks.sh runs this file and records it as
the check "summarize-test".
"""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "dev", "summarize.py")


def junit(suites):
    """suites: {meson test name: [(case name, 'pass' | 'fail' | 'skip')]}"""
    out = ['<?xml version="1.0" encoding="utf-8"?>', "<testsuites>"]
    for test, cases in suites.items():
        out.append(f'<testsuite name="fjord.{test}.Suite" tests="{len(cases)}">')
        for name, state in cases:
            inner = {"pass": "", "fail": "<failure/>", "skip": "<skipped/>"}[state]
            out.append(f'<testcase name="{name}" classname="Suite">{inner}</testcase>')
        out.append("</testsuite>")
    out.append("</testsuites>")
    return "\n".join(out)


class SummarizeTest(unittest.TestCase):
    def run_summary(self, results=None, suites=None, json_results=None, checks=""):
        """Runs summarize.py on a build directory holding what is given;
        returns (last line, exit status, whole output)."""
        with tempfile.TemporaryDirectory() as build:
            logs = os.path.join(build, "meson-logs")
            os.makedirs(logs)
            if json_results is not None:
                with open(os.path.join(logs, "testlog.json"), "w") as f:
                    for name, result in json_results.items():
                        f.write('{"name": "%s", "result": "%s"}\n' % (name, result))
            if suites is not None:
                with open(os.path.join(logs, "testlog.junit.xml"), "w") as f:
                    f.write(junit(suites))
            checks_file = os.path.join(build, "check-results.txt")
            with open(checks_file, "w") as f:
                f.write(checks)
            done = subprocess.run([sys.executable, SCRIPT, build, checks_file], capture_output=True, text=True)
            lines = done.stdout.strip().splitlines()
            return (lines[-1] if lines else ""), done.returncode, done.stdout

    def test_a_run_that_left_no_meson_log_fails(self):
        last, status, out = self.run_summary(checks="PASS clang-format \n")
        self.assertEqual(last, "1 passed, 1 failed")
        self.assertEqual(status, 1)
        self.assertIn("did not run", out)

    def test_an_empty_directory_fails(self):
        last, status, _ = self.run_summary()
        self.assertEqual(last, "0 passed, 1 failed")
        self.assertEqual(status, 1)

    def test_every_case_and_check_counts_once(self):
        last, status, _ = self.run_summary(
            suites={"ldm_test": [("A", "pass"), ("B", "pass")], "tc_test": [("C", "pass"), ("D", "skip")]},
            json_results={"ldm_test": "OK", "tc_test": "OK"},
            checks="PASS clang-format \nPASS fuzz_frame (100 runs)\nSKIP rdma-vm SKIP_VM=1\n")
        self.assertEqual(last, "5 passed, 0 failed")
        self.assertEqual(status, 0)

    def test_a_failing_case_is_named_and_fails_the_run(self):
        last, status, out = self.run_summary(suites={"ldm_test": [("A", "pass"), ("B", "fail")]},
                                             json_results={"ldm_test": "FAIL"})
        self.assertEqual(last, "1 passed, 1 failed")
        self.assertEqual(status, 1)
        self.assertIn("FAILED: fjord.ldm_test.Suite.B", out)

    def test_a_crash_without_a_failing_case_counts_as_one_failure(self):
        last, status, out = self.run_summary(suites={"ldm_test": [("A", "pass")]},
                                             json_results={"ldm_test": "TIMEOUT", "shm_test": "FAIL"})
        self.assertEqual(last, "1 passed, 2 failed")
        self.assertEqual(status, 1)
        self.assertIn("shm_test (FAIL: crashed or timed out)", out)

    def test_a_failed_check_of_run_checks_fails_the_run(self):
        last, status, out = self.run_summary(suites={"ldm_test": [("A", "pass")]}, json_results={"ldm_test": "OK"},
                                             checks="FAIL clang-tidy (see log)\n")
        self.assertEqual(last, "1 passed, 1 failed")
        self.assertEqual(status, 1)
        self.assertIn("FAILED: clang-tidy", out)


if __name__ == "__main__":
    unittest.main()
