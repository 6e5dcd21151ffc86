#!/usr/bin/env bash
# Fjord's developer entry point: the README's two commands and CI call this.
#
#   tools/dev.sh run [latency_bench args]   install what is missing, build, run the main job
#   tools/dev.sh test                       install what is missing, build, run every check;
#                                           ends with "N passed, N failed", non-zero on failure
#   tools/dev.sh build                      install what is missing and build only
#   tools/dev.sh deps {build|run|test}      only check/install the Debian packages
#
# Environment: BUILD_DIR (default ./build), FUZZ_SECONDS (default 20 per
# target), TSAN_DIR (default ./build-tsan: the API suites under ThreadSanitizer),
# SKIP_VM=1 to skip the soft-RoCE guest, SKIP_TIDY=1 to skip clang-tidy.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
FUZZ_DIR=${FUZZ_DIR:-$ROOT/build-fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-20}

BUILD_PKGS="meson ninja-build g++ pkg-config python3 libgtest-dev libgmock-dev libbenchmark-dev libnuma-dev libhwloc-dev libssl-dev libibverbs-dev librdmacm-dev ibverbs-providers libdpdk-dev"
RUN_PKGS="sockperf ucx-utils redis-server redis-tools gnuplot-nox"
TEST_PKGS="clang libclang-rt-14-dev clang-format clang-tidy qemu-system-x86 busybox-static kmod perftest ibverbs-utils rdmacm-utils iproute2 linux-source-6.1 xz-utils make gcc binutils"

log() { printf '[dev] %s\n' "$*" >&2; }

ensure_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ]; then
    log "installing: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${missing[@]}" >/dev/null ||
      { apt-get -o DPkg::Lock::Timeout=600 update >/dev/null &&
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${missing[@]}" >/dev/null; }
  else
    log "missing Debian packages; run as root:"
    echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
}

deps() {
  case "$1" in
    build) ensure_packages $BUILD_PKGS ;;
    run) ensure_packages $BUILD_PKGS $RUN_PKGS ;;
    test) ensure_packages $BUILD_PKGS $RUN_PKGS $TEST_PKGS ;;
    *) log "deps: unknown set '$1'"; exit 2 ;;
  esac
}

build() {
  if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    meson setup "$BUILD_DIR" "$ROOT" --werror -Dbuildtype=debugoptimized >/dev/null
  fi
  ninja -C "$BUILD_DIR" >/dev/null || ninja -C "$BUILD_DIR"
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
  deps) deps "${1:-test}" ;;
  build) deps build; build ;;
  run)
    deps run
    build
    exec "$BUILD_DIR/latency_bench/latency_bench" "$@"
    ;;
  test)
    deps test
    build
    exec "$ROOT/tools/dev/run_checks.sh" "$BUILD_DIR" "$FUZZ_DIR" "$FUZZ_SECONDS"
    ;;
  *)
    sed -n '2,12p' "$0"
    exit 2
    ;;
esac
