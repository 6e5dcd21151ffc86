#!/usr/bin/env bash
# CI entry point for the RDMA checks that need real verbs (tools/dev/run_checks.sh
# step 5): builds or reuses the soft-RDMA guest, boots it once, runs
# guest_checks.sh in it, and appends one "PASS|FAIL|SKIP name detail" line per
# GoogleTest case (contract and authentication suites and rdma_test, on rxe
# and on siw) and one for
# the latency comparison to RESULTS_FILE, printing each line too.
#
#   tests/rdma/run_vm_checks.sh BUILD_DIR RESULTS_FILE
#
# A case that skips inside the guest counts as a failure: there the device
# exists, so a skip means the guest is broken. Latency is reported, never
# judged (benchmarks do not fail CI on a time).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD_DIR=$(realpath "$1")
RESULTS=$2
ITERS=${FJORD_RDMA_PERF_ITERS:-5000}
ROUNDS=${FJORD_RDMA_PERF_ROUNDS:-7}

record() {  # record PASS|FAIL|SKIP name [detail]
  printf '%s %s %s\n' "$1" "$2" "${3:-}" >> "$RESULTS"
  printf '[check] %-4s %s %s\n' "$1" "$2" "${3:-}"
}

if [ ! -x "$BUILD_DIR/tests/rdma_test" ]; then
  record SKIP rdma-vm "the rdma transporter is not built in $BUILD_DIR (needs libibverbs-dev and librdmacm-dev)"
  exit 0
fi
if ! command -v qemu-system-x86_64 >/dev/null; then
  record FAIL rdma-vm "qemu-system-x86_64 missing (tools/dev.sh deps test installs it)"
  exit 0
fi

START=$(date +%s)
GUEST_LOG=$BUILD_DIR/rdma-vm-guest-build.log
if ! GUEST=$("$HERE/build_guest.sh" 2> "$GUEST_LOG" | tail -1) || [ ! -s "$GUEST/vmlinux" ]; then
  record FAIL rdma-vm-guest "building the guest failed (see $GUEST_LOG)"
  tail -20 "$GUEST_LOG"
  exit 0
fi
GUEST_S=$(($(date +%s) - START))
grep -E '^\[guest\]' "$GUEST_LOG"

OUT=$BUILD_DIR/rdma-vm
rm -rf "$OUT"
mkdir -p "$OUT"
"$HERE/run_in_guest.sh" --guest "$GUEST" --devs rxe,siw --rw "$OUT" --timeout 1200 -- \
  sh "$HERE/guest_checks.sh" "$BUILD_DIR" "$OUT" "$ITERS" "$ROUNDS" 2>&1 | tee "$OUT/guest.log" | grep -v '^\[ *OK '
VM_RC=${PIPESTATUS[0]}
TOTAL_S=$(($(date +%s) - START))

python3 - "$OUT" "$RESULTS" "$VM_RC" <<'EOF'
import json, math, os, re, sys

out, results, vm_rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = []

def record(state, name, detail=""):
    lines.append(f"{state} {name} {detail}".rstrip())

expected = ["numa"] + [f"{suite}-{dev}" for dev in ("rxe", "siw") for suite in ("contract", "auth", "rdma_test")] + ["rdma_test-removal"]
for run in expected:
    path = os.path.join(out, run + ".json")
    rc_path = os.path.join(out, run + ".rc")
    rc = open(rc_path).read().strip() if os.path.exists(rc_path) else "missing"
    if not os.path.exists(path):
        record("FAIL", f"rdma-vm/{run}", f"(no results: exit {rc}; see {out}/{run}.log)")
        continue
    report = json.load(open(path))
    for suite in report.get("testsuites", []):
        for case in suite.get("testsuite", []):
            name = f"rdma-vm/{run}/{suite['name']}.{case['name']}"
            time = case.get("time", "")
            if case.get("failures"):
                first = case["failures"][0].get("failure", "").splitlines()
                record("FAIL", name, f"({time}) " + " | ".join(first[:3]))
            elif case.get("result") == "SKIPPED" or case.get("status") == "NOTRUN":
                record("FAIL", name, "(skipped inside the guest, where the device must exist)")
            else:
                record("PASS", name, f"({time})")
    if rc not in ("0", "1"):
        record("FAIL", f"rdma-vm/{run}", f"(exit {rc}: crashed or timed out; see {out}/{run}.log)")

def median(values):
    values = sorted(values)
    return values[len(values) // 2] if values else None

def perftest_rounds(tool):
    """{round: (t_typical, 99% column)} from perftest's logs (one-way us)."""
    rounds = {}
    for name in os.listdir(out):
        m = re.fullmatch(tool + r"-(\d+)\.log", name)
        if m:
            for line in open(os.path.join(out, name)):
                fields = line.split()
                if len(fields) >= 9 and fields[0] == "64":
                    try:
                        typical, p99 = float(fields[4]), float(fields[7])
                    except ValueError:
                        continue
                    if math.isfinite(typical) and typical > 0:  # perftest prints inf when a run goes wrong
                        rounds[int(m.group(1))] = (typical, p99)
    return rounds

def pingpong_rounds():
    """{round: (p50, p99)} from rdma_pingpong's logs (round trip us)."""
    rounds = {}
    for name in os.listdir(out):
        m = re.fullmatch(r"pingpong-(\d+)\.log", name)
        if m:
            found = re.search(r"RTT_US p50 ([\d.]+) p99 ([\d.]+)", open(os.path.join(out, name)).read())
            if found:
                rounds[int(m.group(1))] = (float(found.group(1)), float(found.group(2)))
    return rounds

def medians(rounds):
    return (median([v[0] for v in rounds.values()]), median([v[1] for v in rounds.values()]), len(rounds))

write_r, send_r, ping_r = perftest_rounds("ib_write_lat"), perftest_rounds("ib_send_lat"), pingpong_rounds()
# The ratio of record is that of each tool's median over the rounds. Each
# round's own ratio is printed beside it to show the spread. Round-by-round
# pairs are not the figure of record because the host's speed changes within
# a round, between the tools' runs, so paired ratios spread more than the
# ratio of medians.
paired = sorted(ping_r[r][0] / (2 * write_r[r][0]) for r in ping_r if r in write_r)
if write_r and send_r and ping_r:
    write, send, ping = medians(write_r), medians(send_r), medians(ping_r)
    record("PASS", "rdma-vm/latency",
           f"(64 B on rxe0, RTT p50/p99 in us, median of {ping[2]} alternating rounds: fjord rdma "
           f"{ping[0]:.1f}/{ping[1]:.1f}; ib_write_lat {2*write[0]:.1f}/{2*write[1]:.1f}; "
           f"ib_send_lat {2*send[0]:.1f}/{2*send[1]:.1f}; ours/ib_write_lat = {ping[0] / (2 * write[0]):.2f}, "
           f"target <= 1.2; each round's ratio: {' '.join(f'{x:.2f}' for x in paired)})")
else:
    record("FAIL", "rdma-vm/latency", f"(a latency run produced no figure: see {out}/*.log)")
# latency_bench's own ping over the same device, once, after the rounds. It
# stamps each round trip with two CLOCK_MONOTONIC reads, which the guest
# serves from its emulated HPET (clock_read_ns in its JSON); perftest and
# rdma_pingpong stamp with the cycle counter, so its figure is also given
# net of those two reads.
lb_rc_path = os.path.join(out, "latency_bench-ping.rc")
if write_r and os.path.exists(lb_rc_path):
    lb_rc = open(lb_rc_path).read().strip()
    try:
        lb = json.load(open(os.path.join(out, "latency_bench-ping.json")))
        p50, p99 = lb["rtt_ns"]["p50"] / 1000, lb["rtt_ns"]["p99"] / 1000
        clock = lb["machine"]["clock_read_ns"] / 1000
        write = medians(write_r)
        net = p50 - 2 * clock
        record("PASS" if lb_rc == "0" and lb["status"] == "measured" else "FAIL", "rdma-vm/latency_bench-ping",
               f"(latency_bench ping --config [rdma] on rxe0, 64 B, RTT p50/p99 {p50:.1f}/{p99:.1f} us with two "
               f"clock reads of {clock:.2f} us each inside; net of them {net:.1f} us = {net / (2 * write[0]):.2f} x "
               f"ib_write_lat's median)")
    except (OSError, ValueError, KeyError) as e:
        record("FAIL", "rdma-vm/latency_bench-ping",
               f"(exit {lb_rc}, no figure: {e}; see {out}/latency_bench-ping.log)")
access_rc_path = os.path.join(out, "latency_bench-access.rc")
if os.path.exists(access_rc_path):
    access_rc = open(access_rc_path).read().strip()
    try:
        rows = json.load(open(os.path.join(out, "latency_bench-access.json")))["results"]
        measured = {r["access"]: r["us_per_row"]["p50"] for r in rows
                    if r["transporter"] == "rdma" and r["status"] == "measured"}
        ok = access_rc == "0" and rows and len(measured) == len(rows)
        record("PASS" if ok else "FAIL", "rdma-vm/latency_bench-access",
               f"(latency_bench access --transporter rdma on rxe0, 2000 rows, us per row p50: "
               + ", ".join(f"{k} {v:.1f}" for k, v in measured.items())
               + ("" if ok else f"; exit {access_rc}, {len(rows) - len(measured)} methods not measured")
               + f"; see {out}/latency_bench-access.log)")
    except (OSError, ValueError, KeyError) as e:
        record("FAIL", "rdma-vm/latency_bench-access",
               f"(exit {access_rc}, no figures: {e}; see {out}/latency_bench-access.log)")
if vm_rc not in (0,):
    record("FAIL", "rdma-vm/guest", f"(guest exit {vm_rc}: 124 = timeout, 255 = guest failure; see {out}/guest.log)")

with open(results, "a") as f:
    for line in lines:
        f.write(line + "\n")
for line in lines:
    state, rest = line.split(" ", 1)
    print(f"[check] {state:<4} {rest}")
EOF
echo "[rdma-vm] guest ready in ${GUEST_S}s, whole VM part ${TOTAL_S}s"
