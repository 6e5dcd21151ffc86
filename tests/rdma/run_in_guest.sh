#!/usr/bin/env bash
# Runs one command inside a throw-away soft-RDMA guest and exits with its
# status (124 on timeout, 255 when the guest itself failed).
#
#   tests/rdma/run_in_guest.sh --guest DIR [--rw DIR] [--devs rxe|rxe,siw]
#                              [--timeout S] [--mem MB] [--smp N] [--keep]
#                              [--nic MAC NETDEV]... [--append TEXT] -- CMD ARGS...
#
# DIR is what build_guest.sh printed. The guest (QEMU TCG: this machine's KVM
# cannot run a stock kernel) sees the host's / read-only with a tmpfs
# overlay, runs CMD as root in the caller's working directory with a clean
# environment (PATH, HOME, RXE_IP, SIW_IP), and streams its output. Writes
# are lost unless they go under --rw DIR, shared read-write at the same path.
# Each --nic adds a virtio NIC with that MAC on a QEMU network backend
# (NETDEV: "dgram,local.type=inet,..." joins another guest's NIC); --append
# adds words to the kernel command line (guest_init.sh reads RXE_ADDR and
# SIW_ADDR there to put the devices on the NICs).
set -u
GUEST= RW= DEVS=rxe TIMEOUT_S=600 MEM_MB=2048 KEEP=0 SMP=$(nproc) APPEND=
NICS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --guest) GUEST=$2; shift 2 ;;
    --rw) RW=$(realpath "$2"); shift 2 ;;
    --devs) DEVS=$2; shift 2 ;;
    --timeout) TIMEOUT_S=$2; shift 2 ;;
    --mem) MEM_MB=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --smp) SMP=$2; shift 2 ;;
    --nic) NICS+=("$2" "$3"); shift 3 ;;
    --append) APPEND="$APPEND $2"; shift 2 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
if [ -z "$GUEST" ] || [ $# -eq 0 ]; then
  sed -n '2,18p' "$0" >&2
  exit 2
fi
[ -s "$GUEST/vmlinux" ] && [ -s "$GUEST/initrd.img" ] || { echo "run_in_guest: no guest in $GUEST" >&2; exit 255; }

JOB=$(mktemp -d "${TMPDIR:-/tmp}/fjord-guest.XXXXXX")
{
  printf 'cd %q || exit 125\n' "$PWD"
  printf 'exec'
  printf ' %q' "$@"
  printf '\n'
} > "$JOB/cmd.sh"
: > "$JOB/out"
[ -n "$RW" ] && printf '%s' "$RW" > "$JOB/rw_path"

QEMU_ARGS=(-M q35 -accel tcg -cpu max -m "$MEM_MB" -smp "$SMP" -nodefaults -no-user-config
  -display none -monitor none -no-reboot -nic none -serial "file:$JOB/console.log"
  -kernel "$GUEST/vmlinux" -initrd "$GUEST/initrd.img"
  -append "console=ttyS0 quiet panic=-1 mitigations=off RDMA_DEVS=$DEVS$APPEND"
  -fsdev "local,id=hostfs,path=/,security_model=none,readonly=on,multidevs=remap"
  -device virtio-9p-pci,fsdev=hostfs,mount_tag=hostroot
  -fsdev "local,id=jobfs,path=$JOB,security_model=none"
  -device virtio-9p-pci,fsdev=jobfs,mount_tag=job)
for ((i = 0; i < ${#NICS[@]}; i += 2)); do
  QEMU_ARGS+=(-netdev "${NICS[i + 1]},id=net$i" -device "virtio-net-pci,netdev=net$i,mac=${NICS[i]}")
done
# Two NUMA nodes (CPU 0 and the rest), so NUMA placement is tested for real.
if [ "$SMP" -ge 2 ]; then
  HALF=$((MEM_MB / 2))
  QEMU_ARGS+=(-object "memory-backend-ram,id=numa0,size=${HALF}M" -object "memory-backend-ram,id=numa1,size=$((MEM_MB - HALF))M"
              -numa "node,nodeid=0,cpus=0,memdev=numa0" -numa "node,nodeid=1,cpus=1-$((SMP - 1)),memdev=numa1")
fi
if [ -n "$RW" ]; then
  QEMU_ARGS+=(-fsdev "local,id=rwfs,path=$RW,security_model=none" -device virtio-9p-pci,fsdev=rwfs,mount_tag=rw)
fi

timeout "$TIMEOUT_S" qemu-system-x86_64 "${QEMU_ARGS[@]}" < /dev/null > "$JOB/qemu.log" 2>&1 &
QEMU_PID=$!
trap 'kill $QEMU_PID 2>/dev/null' INT TERM
tail -s 0.2 -n +1 -f --pid=$QEMU_PID "$JOB/out" &
TAIL_PID=$!
wait $QEMU_PID
QEMU_RC=$?
wait $TAIL_PID 2>/dev/null

if [ $QEMU_RC = 124 ]; then
  echo "run_in_guest: timed out after ${TIMEOUT_S}s" >&2
  RC=124
elif [ -s "$JOB/rc" ]; then
  RC=$(cat "$JOB/rc")
else
  echo "run_in_guest: the guest failed (qemu exit $QEMU_RC); console:" >&2
  cat "$JOB/console.log" "$JOB/qemu.log" >&2
  RC=255
fi
# Device set-up problems are on the console, not in the command's output.
grep -a -E '^\[init\]' "$JOB/console.log" | grep -v -E '\[init\] (ready|done)' >&2
if [ $KEEP = 1 ]; then
  echo "run_in_guest: job files kept in $JOB" >&2
else
  rm -rf "$JOB"
fi
exit "$RC"
