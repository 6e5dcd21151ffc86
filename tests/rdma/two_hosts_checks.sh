#!/bin/sh
# Runs inside each of the two soft-RDMA guests that run_two_hosts.sh boots,
# joined by virtual Ethernet: host a (rxe0 on 10.88.0.1, siw0 on 10.89.0.1)
# serves, host b (.2 on both) measures. They meet through files in OUT, a
# directory both share read-write. Per round, alternating so that noise from
# the shared machine hits both tools alike: ib_write_lat between the two
# rxe0 devices (the floor), then latency_bench --client against
# latency_bench --server --transporter rdma started with no config. Then
# once each: latency_bench over tcp and over rdma on siw0, and the contract
# suite's cross-process cases (on a: the test; on b: its peer process).
#
#   two_hosts_checks.sh a|b BUILD_DIR OUT ITERS ROUNDS
set -u
ROLE=$1 BUILD=$2 OUT=$3 ITERS=$4 ROUNDS=$5
ulimit -l unlimited
LB=$BUILD/latency_bench/latency_bench
if [ "$ROLE" = a ]; then PEER_RXE=10.88.0.2 PEER_SIW=10.89.0.2; else PEER_RXE=10.88.0.1 PEER_SIW=10.89.0.1; fi

stamp() { echo "[$ROLE $(cut -d' ' -f1 /proc/uptime)s] $*"; }
mark() { : > "$OUT/$1"; }
wait_for() {  # wait_for FILE SECONDS: 1 if it did not appear in time
  tries=$(($2 * 10))
  while [ ! -e "$OUT/$1" ]; do
    tries=$((tries - 1))
    [ $tries -le 0 ] && { stamp "gave up waiting for $1"; return 1; }
    sleep 0.1
  done
}

# Both NICs answer before anything starts.
for peer in $PEER_RXE $PEER_SIW; do
  tries=0
  until busybox ping -c 1 -W 1 "$peer" > /dev/null 2>&1; do
    tries=$((tries + 1))
    [ $tries -ge 60 ] && { stamp "no answer from $peer"; break; }
  done
done
mark "$ROLE-up"
wait_for "$( [ "$ROLE" = a ] && echo b-up || echo a-up)" 120 || exit 1
stamp "link up: $(ip -o -4 addr show eth0 | awk '{print $4}'), peer $PEER_RXE answers"

serve() {
  # No config: listens on every address, every RDMA device; admits the peer.
  # The other servers start after the rounds: nothing else runs beside the
  # measured pair on the guest's one vCPU.
  "$LB" --server --transporter rdma --peer-host "$PEER_RXE" > "$OUT/server-rdma.log" 2>&1 &
  for round in $(seq 1 "$ROUNDS"); do
    ib_write_lat -d rxe0 -x 1 -s 64 -n "$ITERS" -F > "$OUT/ib_write_lat-server-$round.log" 2>&1 &
    perf=$!
    sleep 0.5
    mark "a-perf-$round"
    wait $perf
    wait_for "b-round-$round" 300
  done
  "$LB" --server --transporter tcp --port 11861 --peer-host "$PEER_RXE" > "$OUT/server-tcp.log" 2>&1 &
  "$LB" --server --transporter rdma --port 11862 --peer-host "$PEER_SIW" > "$OUT/server-siw.log" 2>&1 &
  sleep 1
  mark a-others-up
  wait_for b-singles-done 300
  mark a-servers-done
  stamp "contract suite, cross-process cases (this host runs the test)"
  RXE_IP=10.88.0.1 FJORD_PEER_IP=$PEER_RXE FJORD_CONTRACT_REMOTE_DIR=$OUT \
    FJORD_CONTRACT_PEER="$BUILD/tests/contract_peer" timeout 400 "$BUILD/tests/transporter_contract_test" \
    --gtest_filter='*PeerKilledMidStream*/tcp:*PeerKilledMidStream*/rdma' \
    --gtest_output="json:$OUT/contract-two-hosts.json" > "$OUT/contract-two-hosts.log" 2>&1
  echo $? > "$OUT/contract-two-hosts.rc"
  grep -E '^\[ *(OK|FAILED|SKIPPED) ' "$OUT/contract-two-hosts.log" | grep -v 'listed below'
  wait_for b-done 300
  kill $(jobs -p) 2> /dev/null
}

measure() {  # each round: the floor, then latency_bench over the same device
  for round in $(seq 1 "$ROUNDS"); do
    wait_for "a-perf-$round" 120 || break
    tries=0
    until ib_write_lat -d rxe0 -x 1 -s 64 -n "$ITERS" -F "$PEER_RXE" > "$OUT/ib_write_lat-$round.log" 2>&1; do
      tries=$((tries + 1))
      [ $tries -ge 3 ] && break
      sleep 1
    done
    echo "ib_write_lat round $round: $(grep -E '^ *64 ' "$OUT/ib_write_lat-$round.log" | tail -1)"
    timeout 120 "$LB" --client "$PEER_RXE" --transporter rdma --size 64 --iterations "$ITERS" --json \
      > "$OUT/lb-rdma-$round.json" 2> "$OUT/lb-rdma-$round.log"
    echo $? > "$OUT/lb-rdma-$round.rc"
    mark "b-round-$round"
  done
  wait_for a-others-up 120
  timeout 120 "$LB" --client "$PEER_RXE" --transporter tcp --port 11861 --size 64 --iterations "$ITERS" --json \
    > "$OUT/lb-tcp.json" 2> "$OUT/lb-tcp.log"
  echo $? > "$OUT/lb-tcp.rc"
  timeout 120 "$LB" --client "$PEER_SIW" --transporter rdma --port 11862 --size 64 --iterations "$ITERS" --json \
    > "$OUT/lb-siw.json" 2> "$OUT/lb-siw.log"
  echo $? > "$OUT/lb-siw.rc"
  mark b-singles-done
  wait_for a-servers-done 300
  peer_for_contract tcp
  peer_for_contract rdma
  mark b-done
}

# The far end of one contract case (see PeerProcess in the contract test).
peer_for_contract() {
  wait_for "peer-$1.args" 200 || return
  stamp "contract peer for $1"
  "$BUILD/tests/contract_peer" $(cat "$OUT/peer-$1.args") > "$OUT/contract-peer-$1.log" 2>&1 &
  pid=$!
  wait_for "peer-$1.kill" 200
  kill -9 $pid 2> /dev/null
  wait $pid 2> /dev/null
  echo $? > "$OUT/peer-$1.killed"
}

if [ "$ROLE" = a ]; then serve; else measure; fi
stamp done
