#!/usr/bin/env bash
# CI entry point for RDMA between two hosts (tools/dev/run_checks.sh step 5,
# after run_vm_checks.sh): boots two soft-RDMA guests from the same cached
# image, joined by two virtual Ethernet links (QEMU's dgram backend over UDP
# on 127.0.0.1: one segment for rxe0, one for siw0), runs
# two_hosts_checks.sh in each, and appends "PASS|FAIL|SKIP name detail"
# lines to RESULTS_FILE: latency_bench --server/--client over rdma (rxe0 and
# siw0) and tcp, the contract suite's cross-process cases, and the latency
# of latency_bench's rdma ping beside ib_write_lat's between the same two
# guests in the same run, with their ratio (reported, never judged).
#
#   tests/rdma/run_two_hosts.sh BUILD_DIR RESULTS_FILE
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD_DIR=$(realpath "$1")
RESULTS=$2
ITERS=${FJORD_TWO_HOSTS_ITERS:-2000}
ROUNDS=${FJORD_TWO_HOSTS_ROUNDS:-3}
# One vCPU each: two guests busy-polling on two vCPUs each would share the
# machine's cores four ways, and every round trip would wait for a host
# scheduler slice.
SMP=${FJORD_TWO_HOSTS_SMP:-1}

record() {  # record PASS|FAIL|SKIP name [detail]
  printf '%s %s %s\n' "$1" "$2" "${3:-}" >> "$RESULTS"
  printf '[check] %-4s %s %s\n' "$1" "$2" "${3:-}"
}

if [ ! -x "$BUILD_DIR/tests/rdma_test" ]; then
  record SKIP rdma-two-hosts "the rdma transporter is not built in $BUILD_DIR (needs libibverbs-dev and librdmacm-dev)"
  exit 0
fi
command -v qemu-system-x86_64 > /dev/null || { record SKIP rdma-two-hosts "qemu-system-x86_64 missing"; exit 0; }
START=$(date +%s)
if ! GUEST=$("$HERE/build_guest.sh" 2> /dev/null | tail -1) || [ ! -s "$GUEST/vmlinux" ]; then
  record SKIP rdma-two-hosts "no guest image (tests/rdma/build_guest.sh failed; run_vm_checks.sh reports why)"
  exit 0
fi
OUT=$BUILD_DIR/rdma-two-hosts
rm -rf "$OUT"
mkdir -p "$OUT"
# Four UDP ports free now: each guest's end of the two segments.
read -r P1 P2 P3 P4 < <(python3 -c '
import socket
socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(4)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')
nic() { echo "dgram,local.type=inet,local.host=127.0.0.1,local.port=$1,remote.type=inet,remote.host=127.0.0.1,remote.port=$2"; }
guest() {  # guest a|b RXE_PORTS SIW_PORTS
  local role=$1 n
  n=$([ "$role" = a ] && echo 1 || echo 2)
  "$HERE/run_in_guest.sh" --guest "$GUEST" --devs rxe,siw --rw "$OUT" --timeout 900 --mem 1024 --smp "$SMP" \
    --nic "52:54:00:88:00:0$n" "$(nic $2)" --nic "52:54:00:89:00:0$n" "$(nic $3)" \
    --append "RXE_ADDR=10.88.0.$n/24 SIW_ADDR=10.89.0.$n/24" -- \
    sh "$HERE/two_hosts_checks.sh" "$role" "$BUILD_DIR" "$OUT" "$ITERS" "$ROUNDS" > "$OUT/guest-$role.log" 2>&1
}
guest a "$P1 $P2" "$P3 $P4" &
A_PID=$!
guest b "$P2 $P1" "$P4 $P3" &
B_PID=$!
wait $A_PID
A_RC=$?
wait $B_PID
B_RC=$?
grep -h -v '^\[ *OK ' "$OUT/guest-a.log" "$OUT/guest-b.log"
if [ ! -e "$OUT/a-up" ] || [ ! -e "$OUT/b-up" ]; then
  record SKIP rdma-two-hosts "the guests did not start (exit $A_RC/$B_RC; see $OUT/guest-*.log)"
  exit 0
fi
python3 "$HERE/two_hosts_report.py" "$OUT" "$RESULTS" "$A_RC" "$B_RC"
echo "[rdma-two-hosts] both guests done in $(($(date +%s) - START))s"
