#!/bin/bash
# Entrypoint of the QEMU runner (hcu's local stand-in for happysixd/osworld-docker): boots the disk mounted
# at /System.qcow2 with QEMU on /dev/kvm and forwards the guest's ports to the container's.
#
# Contract (as hcu and OSWorld's Docker provider use the official image):
#   /System.qcow2  the guest disk, may be read-only: the VM writes to /boot.qcow2, an overlay created here
#   /dev/kvm       required; KVM=N boots with TCG instead (very slow) and says so
#   NET_ADMIN      required (bridge, tap and NAT for the guest); no --privileged
#   RAM_SIZE (1G), CPU_CORES (1), DISK_SIZE (16G): memory, cores, and a blank data disk /storage/data.qcow2
#   ports          5000 (in-guest API), 9222 (CDP), 8080 (VLC) forwarded to the guest; 8006 the VM's screen
#                  over VNC-on-WebSocket
#   CPU_MODEL      QEMU -cpu (default qemu64: what nested KVM on hcu's CI machine accepts)
set -euo pipefail
: "${RAM_SIZE:=1G}" "${CPU_CORES:=1}" "${DISK_SIZE:=16G}" "${KVM:=Y}" "${CPU_MODEL:=qemu64}"
storage=/storage
guest_ip=20.20.20.21
bridge_ip=20.20.20.1
forwarded_ports=5000,9222,8080

say() { echo "hcu-qemu: $*"; }
die() { echo "hcu-qemu: error: $*" >&2; exit 1; }

[[ -f /System.qcow2 ]] || die "no guest disk: mount the guest qcow2 at /System.qcow2 (-v IMAGE:/System.qcow2:ro)"
[[ $RAM_SIZE =~ ^[0-9]+[MGT]$ ]] || die "RAM_SIZE=$RAM_SIZE: expected a size with its unit (4G, 8192M)"
[[ $DISK_SIZE =~ ^[0-9]+[MGT]$ ]] || die "DISK_SIZE=$DISK_SIZE: expected a size with its unit (32G)"
[[ $CPU_CORES =~ ^[1-9][0-9]*$ ]] || die "CPU_CORES=$CPU_CORES: expected a positive integer"

if [[ $KVM == [Nn]* ]]; then
  accel=tcg
  say "KVM=N: booting with TCG software emulation, expect a boot many times slower than with KVM"
elif [[ -c /dev/kvm && -r /dev/kvm && -w /dev/kvm ]]; then
  accel=kvm
else
  die "KVM acceleration is not available: add --device /dev/kvm (KVM=N boots with TCG, very slowly)"
fi

# Disks: the VM never writes /System.qcow2 (it may be a shared read-only base); its writes go to an overlay
# that lives as long as the container. DISK_SIZE is a blank data disk kept in /storage, grown, never shrunk.
mkdir -p "$storage"
[[ -f /boot.qcow2 ]] || qemu-img create -q -f qcow2 -F qcow2 -b /System.qcow2 /boot.qcow2
data=$storage/data.qcow2
if [[ ! -f $data ]]; then
  qemu-img create -q -f qcow2 "$data" "$DISK_SIZE"
elif (( $(numfmt --from=iec "$DISK_SIZE") > $(qemu-img info --output=json "$data" | sed -n 's/.*"virtual-size": \([0-9]*\).*/\1/p') )); then
  qemu-img resize -q "$data" "$DISK_SIZE"
fi

# Network: the guest sits on a bridge behind NAT; the container's forwarded ports are DNATed to it and a
# DHCP server gives it its fixed address. All of this needs NET_ADMIN.
if [[ ! -c /dev/net/tun ]]; then
  mkdir -p /dev/net
  mknod /dev/net/tun c 10 200 2>/dev/null || die "cannot create /dev/net/tun: add --cap-add NET_ADMIN"
fi
ip link add dev hcubr0 type bridge 2>/dev/null || die "cannot create the guest's bridge: add --cap-add NET_ADMIN"
ip address add "$bridge_ip/24" dev hcubr0
ip link set hcubr0 up
ip tuntap add dev hcutap0 mode tap
ip link set hcutap0 master hcubr0 up
uplink=$(awk '$2 == "00000000" { print $1; exit }' /proc/net/route)
[[ -n $uplink ]] || die "no default route in the container"
uplink_ip=$(ip -4 -o address show dev "$uplink" | awk '{ split($4, a, "/"); print a[1]; exit }')
[[ $(</proc/sys/net/ipv4/ip_forward) == 1 ]] || sysctl -qw net.ipv4.ip_forward=1 \
  || die "IP forwarding is off: add --sysctl net.ipv4.ip_forward=1"
iptables -t nat -A POSTROUTING -s "$guest_ip" -o "$uplink" -j MASQUERADE
iptables -t nat -A PREROUTING -i "$uplink" -d "$uplink_ip" -p tcp -m multiport --dports "$forwarded_ports" \
  -j DNAT --to-destination "$guest_ip"
dnsmasq --interface=hcubr0 --bind-interfaces --except-interface=lo --dhcp-range="$guest_ip,$guest_ip" \
  --dhcp-option=option:router,"$bridge_ip" --dhcp-option=option:dns-server,"$bridge_ip" \
  --dhcp-leasefile=/run/dnsmasq.leases --pid-file=/run/dnsmasq.pid --log-facility=-

# Firmware: SeaBIOS (QEMU's default), so the disk boots by BIOS. The official image boots its Ubuntu disk by
# UEFI; OVMF cannot run on nested KVM without executable read-only memory slots (hcu's CI machine): KVM
# emulates OVMF's code from ROM and fails on its first FPU instruction.
say "booting /System.qcow2: accel=$accel cpu=$CPU_MODEL cores=$CPU_CORES ram=$RAM_SIZE data disk=$DISK_SIZE"
# The VM's serial console is this container's log (the guest prints DESKTOP_READY there).
exec qemu-system-x86_64 -name hcu-guest -nodefaults -no-user-config \
  -machine q35,accel="$accel" -cpu "$CPU_MODEL" -smp "$CPU_CORES" -m "$RAM_SIZE" \
  -drive id=boot,if=none,format=qcow2,file=/boot.qcow2,discard=unmap,detect-zeroes=unmap \
  -device virtio-blk-pci,drive=boot,bootindex=1 \
  -drive id=data,if=none,format=qcow2,file="$data",discard=unmap,detect-zeroes=unmap \
  -device virtio-blk-pci,drive=data \
  -netdev tap,id=net0,ifname=hcutap0,script=no,downscript=no \
  -device virtio-net-pci,netdev=net0,mac=52:54:00:12:34:56 \
  -device virtio-rng-pci \
  -vga std -display none -vnc 0.0.0.0:0,websocket=8006 \
  -chardev stdio,id=console,signal=off -serial chardev:console \
  -monitor none
