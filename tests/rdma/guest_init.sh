#!/bin/busybox sh
# /init of the soft-RDMA test guest (packed into initrd.img by build_guest.sh).
#
# The host's / arrives read-only over 9p (tag hostroot) and is overlaid with a
# tmpfs, so host-built binaries and the host's libibverbs, librdmacm and
# providers run unchanged. A read-write 9p share (tag job) carries the
# command (cmd.sh), its output (out) and exit code (rc); an optional second
# one (tag rw) appears at the host path named in job/rw_path.
#
# Devices: rxe0 (soft-RoCE) on dummy0 = 10.11.12.1/24, and with RDMA_DEVS
# containing siw, siw0 (soft-iWARP) on dummy1 = 10.11.13.1/24. Each device
# has its own interface and address, so rdma_cm's address -> device mapping
# is unambiguous. The command sees RXE_IP and SIW_IP.
#
# Two hosts (run_in_guest.sh --nic): with RXE_ADDR=A/N (and SIW_ADDR=B/N) on
# the kernel command line, rxe0 sits on the first virtio NIC (eth0) with
# address A and siw0 on the second (eth1) with B, instead of the dummies;
# the other guest's NICs are on the same virtual Ethernet segments.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
log() { echo "[init] $*" > /dev/console; }
die() {
  log "FATAL: $*"
  echo 255 > /job/rc 2>/dev/null
  sync
  poweroff -f
  sleep 5
}
in_root() {
  chroot /newroot /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"
}

echo /bin/modprobe > /proc/sys/kernel/modprobe
for m in crc32_generic crc32c_generic virtio_pci 9pnet_virtio 9p overlay ib_uverbs rdma_ucm rdma_rxe dummy; do
  modprobe $m || log "modprobe $m failed"
done

mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 job /job || die "mount job share"
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /lower || die "mount host root"
mount -t tmpfs -o size=50% tmpfs /ovl
mkdir -p /ovl/upper /ovl/work
if ! mount -t overlay overlay -o lowerdir=/lower,upperdir=/ovl/upper,workdir=/ovl/work /newroot; then
  log "overlay failed; read-only bind with a tmpfs /tmp instead"
  mount --bind /lower /newroot
  mount -t tmpfs tmpfs /newroot/tmp
fi
mount -t proc proc /newroot/proc
mount -t sysfs sys /newroot/sys
mount -t devtmpfs dev /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm /newroot/run /newroot/job
mount -t devpts devpts /newroot/dev/pts
mount -t tmpfs tmpfs /newroot/dev/shm
mount -t tmpfs tmpfs /newroot/run
mount --bind /job /newroot/job
if [ -s /job/rw_path ]; then
  RW=$(cat /job/rw_path)
  mkdir -p "/newroot$RW"
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 rw "/newroot$RW" || die "mount rw share"
fi

ip link set lo up
net_up() {  # net_up IFACE ADDRESS
  ip link add "$1" type dummy 2>/dev/null
  ip addr add "$2" dev "$1"
  ip link set "$1" up
}
nic_up() {  # nic_up IFACE ADDRESS: a virtio NIC joined to the other guest
  ip addr add "$2" dev "$1" || log "no $1 for $2"
  ip link set "$1" up
}
RXE_NET=dummy0 SIW_NET=dummy1 RXE_ADDR=10.11.12.1/24 SIW_ADDR=10.11.13.1/24
for word in $(cat /proc/cmdline); do
  case $word in
    RXE_ADDR=*) RXE_ADDR=${word#RXE_ADDR=} RXE_NET=eth0 ;;
    SIW_ADDR=*) SIW_ADDR=${word#SIW_ADDR=} SIW_NET=eth1 ;;
  esac
done
[ $RXE_NET = eth0 ] && modprobe virtio_net
dev_net() {  # dev_net IFACE ADDRESS
  case $1 in
    dummy*) net_up "$1" "$2" ;;
    *) nic_up "$1" "$2" ;;
  esac
}
dev_net $RXE_NET $RXE_ADDR
for d in $(echo "${RDMA_DEVS:-rxe}" | tr , ' '); do
  case $d in
    rxe) in_root rdma link add rxe0 type rxe netdev $RXE_NET > /dev/console 2>&1 || log "rdma link add rxe0 failed" ;;
    siw)
      modprobe siw || log "modprobe siw failed"
      dev_net $SIW_NET $SIW_ADDR
      in_root rdma link add siw0 type siw netdev $SIW_NET > /dev/console 2>&1 || log "rdma link add siw0 failed"
      ;;
  esac
done
log "ready $(cut -d' ' -f1 /proc/uptime)"

in_root TERM=dumb RXE_IP=${RXE_ADDR%/*} SIW_IP=${SIW_ADDR%/*} /bin/sh /job/cmd.sh > /job/out 2>&1 < /dev/null
echo $? > /job/rc
log "done $(cut -d' ' -f1 /proc/uptime)"
sync
umount /newroot/job 2>/dev/null
poweroff -f
sleep 5
