#!/bin/sh
# Runs inside the soft-RDMA guest (run_vm_checks.sh boots it): the contract
# and authentication suites' rdma cases and rdma_test on soft-RoCE (rxe0) and on soft-iWARP
# (siw0), then perftest's ib_write_lat / ib_send_lat beside rdma_pingpong on
# rxe0 and latency_bench's ping and access table once, then the device-removal case (it takes
# siw0 away for good). Writes gtest JSON, logs and perf output into OUT (a read-write share);
# the host turns them into PASS/FAIL lines.
#
#   guest_checks.sh BUILD_DIR OUT [ITERS] [ROUNDS]
set -u
BUILD=$1
OUT=$2
ITERS=${3:-5000}
ROUNDS=${4:-7}
# siw (like real HCAs) charges pinned memory against RLIMIT_MEMLOCK; RDMA
# services run with it unlimited, so the tests do too.
ulimit -l unlimited
export FJORD_CONTRACT_PEER="$BUILD/tests/contract_peer"
export FJORD_RDMA_PEER="$BUILD/tests/rdma/rdma_peer"

stamp() { echo "[guest $(cut -d' ' -f1 /proc/uptime)s] $*"; }

suite() {  # suite NAME IP TIMEOUT PROGRAM ARGS...
  name=$1 ip=$2 limit=$3
  shift 3
  stamp "$name"
  RXE_IP=$ip timeout "$limit" "$@" --gtest_output="json:$OUT/$name.json" > "$OUT/$name.log" 2>&1
  echo $? > "$OUT/$name.rc"
  grep -E '^\[ *(OK|FAILED|SKIPPED) ' "$OUT/$name.log" | grep -v 'listed below' || true
}

# NUMA placement of job buffers: the guest has two NUMA nodes.
suite numa "$RXE_IP" 120 "$BUILD/tests/job_buffer_test" --gtest_filter='*PlacedOnTheConsumersNumaNode*'

for dev in rxe siw; do
  [ -d /sys/class/infiniband/${dev}0 ] || { stamp "no ${dev}0 in the guest"; continue; }
  ip=$RXE_IP
  [ $dev = siw ] && ip=$SIW_IP
  suite "contract-$dev" "$ip" 400 "$BUILD/tests/transporter_contract_test" --gtest_filter='*/rdma'
  suite "auth-$dev" "$ip" 200 "$BUILD/tests/authentication_test" --gtest_filter='*/rdma'
  suite "rdma_test-$dev" "$ip" 300 "$BUILD/tests/rdma_test" --gtest_filter='-*DeviceRemoval*'
done

# Latency on the same device in the same guest run, alternating the tools
# ROUNDS times so that noise from the shared host hits all of them alike.
# perftest prints one-way latency (half the round trip); rdma_pingpong
# prints the round trip.
perftest() {  # perftest TOOL ROUND
  "$1" -d rxe0 -x 1 -s 64 -n "$ITERS" -F > "$OUT/$1-server-$2.log" 2>&1 &
  server=$!
  sleep 1
  tries=0
  until "$1" -d rxe0 -x 1 -s 64 -n "$ITERS" -F "$RXE_IP" > "$OUT/$1-$2.log" 2>&1; do
    tries=$((tries + 1))
    [ $tries -ge 3 ] && break
    sleep 1
  done
  wait $server
  echo "$1 round $2: $(grep -E '^ *64 ' "$OUT/$1-$2.log" | tail -1)"
}
if [ -d /sys/class/infiniband/rxe0 ]; then
  stamp "latency: ib_write_lat, ib_send_lat, rdma_pingpong x $ROUNDS"
  for round in $(seq 1 "$ROUNDS"); do
    perftest ib_write_lat "$round"
    perftest ib_send_lat "$round"
    RXE_IP=$RXE_IP timeout 120 "$BUILD/tests/rdma/rdma_pingpong" --iters "$ITERS" --warmup 500 \
      > "$OUT/pingpong-$round.log" 2>&1
    echo "rdma_pingpong round $round: $(grep RTT_US "$OUT/pingpong-$round.log")"
  done
  cat "$OUT/pingpong-1.log"
  # latency_bench itself over the same device: its ping command with the
  # link from a config file (an [rdma] section on rxe0's address).
  printf '[rdma]\nNodeId1=1\nNodeId2=2\nNodeIdServer=1\nHostName1=%s\nHostName2=%s\nPortNumber=11861\n' \
    "$RXE_IP" "$RXE_IP" > "$OUT/latency_bench-rdma.ini"
  stamp "latency_bench ping over rdma"
  timeout 120 "$BUILD/latency_bench/latency_bench" ping --config "$OUT/latency_bench-rdma.ini" --size 64 \
    --iterations "$ITERS" --json > "$OUT/latency_bench-ping.json" 2> "$OUT/latency_bench-ping.log"
  echo $? > "$OUT/latency_bench-ping.rc"
  # And its access table against a data node (fjord-datanode, started by
  # latency_bench in its own process) over rxe0: every method must measure.
  stamp "latency_bench access over rdma"
  timeout 300 "$BUILD/latency_bench/latency_bench" access --transporter rdma --rows 2000 --iterations 500 \
    --no-compare --json > "$OUT/latency_bench-access.json" 2> "$OUT/latency_bench-access.log"
  echo $? > "$OUT/latency_bench-access.rc"
fi
# Last, because siw0 does not come back: delete the interface under siw0
# while links run on both devices.
if [ -d /sys/class/infiniband/siw0 ] && [ -d /sys/class/infiniband/rxe0 ]; then
  export FJORD_RDMA_REMOVE_NETDEV=dummy1 FJORD_RDMA_REMOVE_IP="$SIW_IP"
  suite rdma_test-removal "$RXE_IP" 120 "$BUILD/tests/rdma_test" --gtest_filter='*DeviceRemoval*'
fi
stamp done
