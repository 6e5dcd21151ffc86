#!/usr/bin/env bash
# Runs every check CI runs and prints "N passed, N failed" last.
# Usage: run_checks.sh BUILD_DIR FUZZ_DIR FUZZ_SECONDS   (tools/dev.sh test calls it)
#
# Checks: clang-format, clang-tidy, every GoogleTest case (meson test), the
# test of summarize.py, the installed client, each fuzz target for
# FUZZ_SECONDS under ASan/UBSan, the API suites under TSan (TSAN_DIR,
# default ROOT/build-tsan), the RDMA suites inside the soft-RoCE guest, and
# the two-host RDMA run between two such guests. Each GoogleTest case counts
# as one check.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD_DIR=$1
FUZZ_DIR=$2
FUZZ_SECONDS=$3
RESULTS=$BUILD_DIR/check-results.txt
: > "$RESULTS"
cd "$ROOT"

record() {   # record PASS|FAIL|SKIP name [detail]
  printf '%s %s %s\n' "$1" "$2" "${3:-}" >> "$RESULTS"
  printf '[check] %-4s %s %s\n' "$1" "$2" "${3:-}"
}

SOURCES=$(git ls-files '*.h' '*.cpp' 2>/dev/null | grep -E '^(transport|shm|rdma|engine|tools|latency_bench|tests)/' || true)

# 1. formatting
if [ -n "$SOURCES" ] && clang-format --dry-run --Werror $SOURCES > "$BUILD_DIR/clang-format.log" 2>&1; then
  record PASS clang-format
else
  record FAIL clang-format "(see $BUILD_DIR/clang-format.log; fix with: clang-format -i FILES)"
  head -20 "$BUILD_DIR/clang-format.log"
fi

# 2. clang-tidy over the non-test sources
if [ "${SKIP_TIDY:-0}" = 1 ]; then
  record SKIP clang-tidy "SKIP_TIDY=1"
else
  # tools/examples/ builds against the installed client (step 4), not in this compile database.
  TIDY_FILES=$(echo "$SOURCES" | grep -E '\.cpp$' | grep -v -e '^tests/' -e '^tools/examples/' || true)
  if echo "$TIDY_FILES" | xargs -r -P "$(nproc)" -n 4 clang-tidy -p "$BUILD_DIR" --quiet > "$BUILD_DIR/clang-tidy.log" 2>&1; then
    record PASS clang-tidy
  else
    record FAIL clang-tidy "(see $BUILD_DIR/clang-tidy.log)"
    grep -E "error:|warning:" "$BUILD_DIR/clang-tidy.log" | head -20
  fi
fi

# 3. GoogleTest suites through meson (each case is counted by summarize.py)
meson test -C "$BUILD_DIR" --num-processes 2 --print-errorlogs > "$BUILD_DIR/meson-test.log" 2>&1
MESON_RC=$?
grep -E "^ *[0-9]+/[0-9]+ " "$BUILD_DIR/meson-test.log"
[ $MESON_RC = 0 ] || grep -E "Failure|FAILED|assert|Which is|Expected" "$BUILD_DIR/meson-test.log" | head -40

# 3a. the script that prints this run's last line, on logs made by hand
if python3 tests/tools/summarize_test.py > "$BUILD_DIR/summarize-test.log" 2>&1; then
  record PASS summarize-test "($(grep -m1 -o 'Ran [0-9]* tests' "$BUILD_DIR/summarize-test.log"))"
else
  record FAIL summarize-test "(see $BUILD_DIR/summarize-test.log)"
  tail -20 "$BUILD_DIR/summarize-test.log"
fi

# 3b. the installed client: headers, libfjord-client.a and fjord-client.pc,
# used by the quick-start example against a real data node.
check_install() {
  local dest port pcdir node_pid out
  dest=$(mktemp -d)
  meson install -C "$BUILD_DIR" --destdir "$dest" > "$BUILD_DIR/install.log" 2>&1 || { echo "meson install failed"; return 1; }
  pcdir=$(dirname "$(find "$dest" -name fjord-client.pc | head -1)")
  [ -n "$pcdir" ] || { echo "no fjord-client.pc installed"; return 1; }
  local prefix=$dest$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=prefix fjord-client)
  g++ -std=c++20 -O1 tools/examples/quickstart.cpp -o "$dest/quickstart" \
    $(PKG_CONFIG_PATH=$pcdir pkg-config --define-variable=prefix="$prefix" --cflags --libs fjord-client) \
    > "$BUILD_DIR/quickstart-build.log" 2>&1 || { echo "quickstart does not build against the package"; return 1; }
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  printf '[ndbd]\nNodeId=1\nHostName=127.0.0.1\nServerPort=%s\nDataDir=%s\nDataMemory=16M\nControlSocket=@fjord-install-check-%s\n[api]\nNodeId=50\nHostName=127.0.0.1\n' \
    "$port" "$dest" "$$" > "$dest/cluster.ini"
  "$prefix/bin/fjord-datanode" --config "$dest/cluster.ini" --node-id 1 --quiet 2> "$BUILD_DIR/install-node.log" &
  node_pid=$!
  out=$("$dest/quickstart" "$dest/cluster.ini" 50 2> "$BUILD_DIR/quickstart-run.log")
  kill -TERM "$node_pid"; wait "$node_pid"
  rm -rf "$dest"
  [ "$out" = "row 1: hello from fjord" ] || { echo "quickstart printed: $out"; return 1; }
}
if detail=$(check_install 2>&1); then
  record PASS installed-client "(headers, libfjord-client.a, fjord-client.pc, quickstart against a data node)"
else
  record FAIL installed-client "($detail; logs in $BUILD_DIR/install*.log)"
fi

# 4. fuzz targets (clang, libFuzzer, ASan+UBSan), a short run each
fuzz_node_self_test() {
  local dir seeds="$ROOT/tests/fuzz/corpus/node" fuzzer="$FUZZ_DIR/tests/fuzz/fuzz_node"
  dir=$(mktemp -d)
  FJORD_FUZZ_NODE_SELF_TEST=1 "$fuzzer" -artifact_prefix="$dir/" "$seeds/api_read" "$seeds/api_update" \
    > "$BUILD_DIR/fuzz_node-self-test.log" 2>&1 && { echo "the check did not fire"; rm -rf "$dir"; return 1; }
  grep -q "guarded row 3 changed" "$BUILD_DIR/fuzz_node-self-test.log" ||
    { echo "no changed row named; see $BUILD_DIR/fuzz_node-self-test.log"; rm -rf "$dir"; return 1; }
  FJORD_FUZZ_NODE_SELF_TEST=1 FJORD_FUZZ_NODE_REPLAY="$dir/fuzz_node-inputs-since-check" "$fuzzer" \
    >> "$BUILD_DIR/fuzz_node-self-test.log" 2>&1
  grep -q "this follows input [0-9]* of the replayed log" "$BUILD_DIR/fuzz_node-self-test.log" ||
    { echo "the replay named no input; see $BUILD_DIR/fuzz_node-self-test.log"; rm -rf "$dir"; return 1; }
  rm -rf "$dir"
}
if [ ! -f "$FUZZ_DIR/build.ninja" ]; then
  CXX=clang++ meson setup "$FUZZ_DIR" "$ROOT" -Dfuzz=true -Dtests=disabled -Drdma=disabled -Ddpdk=disabled \
    -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized > "$BUILD_DIR/fuzz-setup.log" 2>&1 ||
    { record FAIL fuzz-build "(see $BUILD_DIR/fuzz-setup.log)"; }
fi
if [ -f "$FUZZ_DIR/build.ninja" ]; then
  FUZZ_TARGETS=$(cd "$ROOT/tests/fuzz" && ls fuzz_*.cpp | sed 's/\.cpp$//')
  if ninja -C "$FUZZ_DIR" $(for t in $FUZZ_TARGETS; do echo "tests/fuzz/$t"; done) > "$BUILD_DIR/fuzz-build.log" 2>&1; then
    for t in $FUZZ_TARGETS; do
      corpus="$ROOT/tests/fuzz/corpus/${t#fuzz_}"
      work=$(mktemp -d)
      if "$FUZZ_DIR/tests/fuzz/$t" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 -artifact_prefix="$BUILD_DIR/$t-" \
           "$work" $( [ -d "$corpus" ] && echo "$corpus" ) > "$BUILD_DIR/$t.log" 2>&1; then
        record PASS "$t" "($(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$BUILD_DIR/$t.log" | grep -o '[0-9]*$') runs in ${FUZZ_SECONDS}s)"
      else
        record FAIL "$t" "(crash input and log in $BUILD_DIR/$t-* and $BUILD_DIR/$t.log)"
        tail -30 "$BUILD_DIR/$t.log"
      fi
      rm -rf "$work"
    done
    # fuzz_node's check must fire: with its guard turned around, the update
    # seed changes a guarded row, the check at exit aborts and writes the
    # inputs since the last check, and their replay names the input.
    if detail=$(fuzz_node_self_test 2>&1); then
      record PASS fuzz_node-self-test "(a changed row is found and its input named)"
    else
      record FAIL fuzz_node-self-test "($detail)"
    fi
  else
    record FAIL fuzz-build "(see $BUILD_DIR/fuzz-build.log)"
    tail -20 "$BUILD_DIR/fuzz-build.log"
  fi
fi

# 4b. the API suites under ThreadSanitizer (clang): many threads share one
# API node there. Only what those suites link is built, in its own directory.
TSAN_DIR=${TSAN_DIR:-$ROOT/build-tsan}
TSAN_SUITES="data_api_threads_test data_api_key_test data_api_transaction_test data_api_scan_test api_protocol_test"
if [ ! -f "$TSAN_DIR/build.ninja" ]; then
  CXX=clang++ CC=clang meson setup "$TSAN_DIR" "$ROOT" -Drdma=disabled -Ddpdk=disabled -Db_sanitize=thread \
    -Db_lundef=false -Dbuildtype=debugoptimized > "$BUILD_DIR/tsan-setup.log" 2>&1 ||
    { record FAIL tsan-build "(see $BUILD_DIR/tsan-setup.log)"; }
fi
if [ -f "$TSAN_DIR/build.ninja" ]; then
  if ninja -C "$TSAN_DIR" $(for t in $TSAN_SUITES; do echo "tests/$t"; done) > "$BUILD_DIR/tsan-build.log" 2>&1; then
    for t in $TSAN_SUITES; do
      # halt_on_error: a race fails the suite at once, with its report.
      if TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" "$TSAN_DIR/tests/$t" > "$BUILD_DIR/tsan-$t.log" 2>&1; then
        record PASS "tsan-$t"
      else
        record FAIL "tsan-$t" "(see $BUILD_DIR/tsan-$t.log)"
        grep -A30 -m1 "WARNING: ThreadSanitizer\|FAILED" "$BUILD_DIR/tsan-$t.log" | head -40
      fi
    done
  else
    record FAIL tsan-build "(see $BUILD_DIR/tsan-build.log)"
    tail -20 "$BUILD_DIR/tsan-build.log"
  fi
fi

# 5. suites that need the soft-RoCE guest (the RDMA transporter's)
if [ -x "$ROOT/tests/rdma/run_vm_checks.sh" ]; then
  if [ "${SKIP_VM:-0}" = 1 ]; then
    record SKIP rdma-vm "SKIP_VM=1"
  else
    "$ROOT/tests/rdma/run_vm_checks.sh" "$BUILD_DIR" "$RESULTS"
  fi
fi
# 5b. two hosts: two guests joined by virtual Ethernet, server on one, client on the other
if [ -x "$ROOT/tests/rdma/run_two_hosts.sh" ]; then
  if [ "${SKIP_VM:-0}" = 1 ]; then
    record SKIP rdma-two-hosts "SKIP_VM=1"
  else
    "$ROOT/tests/rdma/run_two_hosts.sh" "$BUILD_DIR" "$RESULTS"
  fi
fi

exec python3 "$ROOT/tools/dev/summarize.py" "$BUILD_DIR" "$RESULTS"
