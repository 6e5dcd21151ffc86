#!/usr/bin/env python3
"""Counts every check of a CI run and prints "N passed, N failed" last.

Inputs: meson's testlog.json and testlog.junit.xml in BUILD_DIR/meson-logs
(one entry per GoogleTest case with protocol 'gtest'), and RESULTS, a file of
"PASS|FAIL|SKIP name detail" lines from run_checks.sh and the VM runner.
A meson test that failed without naming a failing case (a crash, a timeout)
counts as one failure, and so does a run that left no meson test log (the
suites never ran: a run that checked nothing must not pass). Exit status: 0
when nothing failed.
"""
import json
import os
import sys
import xml.etree.ElementTree as ET


def gtest_counts(build_dir):
    passed = failed = skipped = 0
    failures = []
    logs = os.path.join(build_dir, "meson-logs")
    junit = os.path.join(logs, "testlog.junit.xml")
    cases_by_test = {}
    if os.path.exists(junit):
        for suite in ET.parse(junit).getroot().iter("testsuite"):
            name = suite.attrib.get("name", "")
            parts = name.split(".")
            test = parts[1] if len(parts) > 2 else name
            for case in suite.iter("testcase"):
                state = "pass"
                if case.find("failure") is not None or case.find("error") is not None:
                    state = "fail"
                elif case.find("skipped") is not None:
                    state = "skip"
                cases_by_test.setdefault(test, []).append((name + "." + case.attrib.get("name", "?"), state))
    results = {}
    json_log = os.path.join(logs, "testlog.json")
    if not os.path.exists(json_log):
        return 0, 1, 0, [f"meson test (no {json_log}: the GoogleTest suites did not run)"]
    with open(json_log) as f:
        for line in f:
            if line.strip():
                entry = json.loads(line)
                results[entry["name"]] = entry["result"]
    for test, result in results.items():
        cases = cases_by_test.get(test, [])
        case_failures = [c for c, s in cases if s == "fail"]
        passed += sum(1 for _, s in cases if s == "pass")
        skipped += sum(1 for _, s in cases if s == "skip")
        failed += len(case_failures)
        failures += case_failures
        if result not in ("OK", "SKIP", "EXPECTEDFAIL") and not case_failures:
            failed += 1
            failures.append(f"{test} ({result}: crashed or timed out)")
        elif result == "SKIP" and not cases:
            skipped += 1
    return passed, failed, skipped, failures


def main():
    build_dir, results_file = sys.argv[1], sys.argv[2]
    passed, failed, skipped, failures = gtest_counts(build_dir)
    if os.path.exists(results_file):
        with open(results_file) as f:
            for line in f:
                fields = line.split(" ", 2)
                if len(fields) < 2:
                    continue
                if fields[0] == "PASS":
                    passed += 1
                elif fields[0] == "FAIL":
                    failed += 1
                    failures.append(fields[1])
                elif fields[0] == "SKIP":
                    skipped += 1
    for name in failures:
        print(f"FAILED: {name}")
    if skipped:
        print(f"{skipped} skipped (each prints its reason in the logs above)")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
