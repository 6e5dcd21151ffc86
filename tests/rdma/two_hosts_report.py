#!/usr/bin/env python3
"""Turns the two-guest run's files (two_hosts_checks.sh) into PASS/FAIL lines.

    two_hosts_report.py OUT RESULTS_FILE GUEST_A_RC GUEST_B_RC

Appends one line per check to RESULTS_FILE and prints each. Latency is
reported, never judged: the line of the rdma ping passes when every round
measured, and carries latency_bench's p50 beside ib_write_lat's and their
ratio (the target is <= 1.2)."""
import json
import math
import os
import re
import sys

out, results, rc_a, rc_b = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
lines = []


def record(state, name, detail=""):
    lines.append(f"{state} rdma-two-hosts/{name} {detail}".rstrip())


def read(name, default=""):
    try:
        with open(os.path.join(out, name)) as f:
            return f.read().strip()
    except OSError:
        return default


def median(values):
    values = sorted(values)
    return values[len(values) // 2] if values else None


def latency_bench_run(stem):
    """(p50 us, p99 us, clock read us) of one latency_bench --client run, or an error text."""
    rc = read(stem + ".rc", "missing")
    try:
        report = json.loads(read(stem + ".json"))
        rtt = report["rtt_ns"]
        if rc != "0" or report.get("status") != "measured":
            raise ValueError(f"status {report.get('status')}")
        return rtt["p50"] / 1000, rtt["p99"] / 1000, report["machine"]["clock_read_ns"] / 1000
    except (ValueError, KeyError, TypeError) as e:
        log = read(stem + ".log").splitlines()
        return f"exit {rc}: {e}; {log[-1] if log else 'no log'}"


def write_lat_rounds():
    """{round: typical one-way us} from ib_write_lat's client logs."""
    rounds = {}
    for name in os.listdir(out):
        m = re.fullmatch(r"ib_write_lat-(\d+)\.log", name)
        if not m:
            continue
        for row in read(name).splitlines():
            fields = row.split()
            if len(fields) >= 9 and fields[0] == "64":
                try:
                    typical = float(fields[4])
                except ValueError:
                    continue
                if math.isfinite(typical) and typical > 0:
                    rounds[int(m.group(1))] = typical
    return rounds


def report_single(stem, what):
    run = latency_bench_run(stem)
    if isinstance(run, str):
        record("FAIL", stem, f"({what}: {run}; see {out}/{stem}.log)")
    else:
        record("PASS", stem, f"({what}, 64 B, RTT p50/p99 {run[0]:.1f}/{run[1]:.1f} us)")


def report_rdma_ratio():
    rounds = sorted(int(m.group(1)) for m in (re.fullmatch(r"lb-rdma-(\d+)\.rc", n) for n in os.listdir(out)) if m)
    runs = {r: latency_bench_run(f"lb-rdma-{r}") for r in rounds}
    failed = {r: v for r, v in runs.items() if isinstance(v, str)}
    for r, why in failed.items():
        record("FAIL", f"lb-rdma-{r}", f"(latency_bench --client over rdma, round {r}: {why})")
    good = {r: v for r, v in runs.items() if not isinstance(v, str)}
    floor = write_lat_rounds()
    if not good or not floor:
        record("FAIL", "latency", f"(no figure: {len(good)} latency_bench rounds, {len(floor)} ib_write_lat rounds; "
               f"see {out})")
        return
    p50 = median([v[0] for v in good.values()])
    p99 = median([v[1] for v in good.values()])
    clock = median([v[2] for v in good.values()])
    write_rtt = 2 * median(list(floor.values()))
    net = p50 - 2 * clock
    # Each round's own ratio shows the spread: the machine's load changes
    # between one tool's run and the next, so the ratio of medians is the
    # figure of record.
    paired = " ".join(f"{good[r][0] / (2 * floor[r]):.2f}" for r in sorted(good) if r in floor)
    record("PASS" if not failed else "FAIL", "latency",
           f"(64 B between the two guests' rxe0, RTT in us, median of {len(good)} alternating rounds: "
           f"latency_bench --client/--server rdma p50 {p50:.1f} (p99 {p99:.1f}), {net:.1f} net of its two clock "
           f"reads of {clock:.2f}; ib_write_lat {write_rtt:.1f}; ratio {p50 / write_rtt:.2f} "
           f"({net / write_rtt:.2f} net), target <= 1.2; each round's ratio: {paired})")


def report_contract():
    try:
        suites = json.loads(read("contract-two-hosts.json"))["testsuites"]
    except (ValueError, KeyError):
        record("FAIL", "contract", f"(no results: exit {read('contract-two-hosts.rc', 'missing')}; see "
               f"{out}/contract-two-hosts.log)")
        return
    for suite in suites:
        for case in suite.get("testsuite", []):
            name = f"contract/{suite['name']}.{case['name']}"
            if case.get("failures"):
                first = case["failures"][0].get("failure", "").splitlines()
                record("FAIL", name, "(" + " | ".join(first[:3]) + ")")
            elif case.get("result") == "SKIPPED":
                record("FAIL", name, "(skipped between the two guests, where both ends exist)")
            else:
                record("PASS", name, f"({case.get('time', '')}, peer process on the other guest)")


report_rdma_ratio()
report_single("lb-tcp", "latency_bench --client/--server over tcp between the guests")
report_single("lb-siw", "latency_bench --client/--server over rdma on siw0 (iWARP)")
report_contract()
if rc_a != 0 or rc_b != 0:
    record("FAIL", "guests", f"(exit {rc_a}/{rc_b}: 124 = timeout, 255 = guest failure; see {out}/guest-*.log)")
with open(results, "a") as f:
    for line in lines:
        f.write(line + "\n")
for line in lines:
    state, rest = line.split(" ", 1)
    print(f"[check] {state:<4} {rest}")
