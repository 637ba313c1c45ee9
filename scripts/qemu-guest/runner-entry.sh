#!/bin/bash
# Entrypoint of the QEMU runner (hcu's local stand-in for happysixd/osworld-docker): boots the disk mounted
# at /System.qcow2 with QEMU on /dev/kvm and forwards the guest's ports to the container's.
#
# Contract (as hcu and OSWorld's Docker provider use the official image, and as the image's public lineage,
# qemus/qemu, behaves):
#   /System.qcow2  the guest disk, may be read-only: the VM boots /boot.qcow2, an overlay created over it in
#                  the container's writable layer (so the guest's writes go away with the container)
#   /dev/kvm       writable, and vmx or svm among the CPU's flags, else exit 88; KVM=N boots with TCG instead
#                  (very slow) and says so
#   RAM_SIZE (1G)  exit 17 when RAM_SIZE plus 500 MB exceeds the host's available memory, checked at the start
#                  and again just before QEMU
#   CPU_CORES (1), DISK_SIZE (16G): cores, and a blank raw data disk /storage/data.img (sparse; grown, never
#                  shrunk); the boot disk keeps the size of /System.qcow2
#   CLIENT_PASSWORD ignored: the guest user's password is the one baked into the qcow2
#   NET_ADMIN      required (bridge, tap and NAT for the guest); no --privileged
#   ports          5000 (in-guest API), 9222 (CDP), 8080 (VLC) forwarded to the guest; 8006 the VM's screen
#                  over VNC-on-WebSocket
#   CPU_MODEL      QEMU -cpu (default qemu64: what nested KVM on hcu's CI machine accepts)
#   BOOT_MODE      legacy (default: SeaBIOS) or uefi (Debian's OVMF, its variables kept in /storage), as in
#                  qemus/qemu: the official Ubuntu qcow2 boots by UEFI only
#   ARGUMENTS      extra QEMU parameters, appended last to its command line (word-split), as in qemus/qemu:
#                  hcu passes a QMP socket (-qmp unix:...) and, to restore a saved state, -incoming defer
#   /boot.qcow2    when it exists already (a file bind-mounted there), it is the disk that boots: hcu's own
#                  per-attempt overlay, so the guest's writes land in a host file it can keep
set -euo pipefail
: "${RAM_SIZE:=1G}" "${CPU_CORES:=1}" "${DISK_SIZE:=16G}" "${KVM:=Y}" "${CPU_MODEL:=qemu64}" "${BOOT_MODE:=legacy}"
storage=/storage
guest_ip=20.20.20.21
bridge_ip=20.20.20.1
bridge_mac=52:54:00:20:20:01
forwarded_ports=5000,9222,8080

ram_spare=500000000  # what the official image keeps free beside RAM_SIZE
kvm_exit=88
memory_exit=17

say() { echo "hcu-qemu: $*"; }
fail() { local code=$1; shift; echo "hcu-qemu: error: $*" >&2; exit "$code"; }
die() { fail 1 "$@"; }

check_memory() {  # as the official image: RAM_SIZE plus its spare must fit the host's available memory
  local wanted available
  wanted=$(numfmt --from=iec "$RAM_SIZE")
  available=$(( $(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo) * 1024 ))
  (( wanted + ram_spare <= available )) || fail "$memory_exit" "RAM_SIZE=$RAM_SIZE is too high for the" \
    "$(numfmt --to=iec "$available") of memory available (it needs RAM_SIZE plus 500 MB)"
}

[[ -f /System.qcow2 ]] || die "no guest disk: mount the guest qcow2 at /System.qcow2 (-v IMAGE:/System.qcow2:ro)"
[[ $RAM_SIZE =~ ^[0-9]+[MGT]$ ]] || die "RAM_SIZE=$RAM_SIZE: expected a size with its unit (4G, 8192M)"
[[ $DISK_SIZE =~ ^[0-9]+[MGT]$ ]] || die "DISK_SIZE=$DISK_SIZE: expected a size with its unit (32G)"
[[ $CPU_CORES =~ ^[1-9][0-9]*$ ]] || die "CPU_CORES=$CPU_CORES: expected a positive integer"
[[ $BOOT_MODE == legacy || $BOOT_MODE == uefi ]] || die "BOOT_MODE=$BOOT_MODE: expected legacy or uefi"

check_memory
if [[ $KVM == [Nn]* ]]; then
  accel=tcg
  say "KVM=N: booting with TCG software emulation, expect a boot many times slower than with KVM"
else
  accel=kvm
  if [[ ! -e /dev/kvm ]]; then
    kvm_error="/dev/kvm is missing"
  elif ! sh -c ': > /dev/kvm' 2>/dev/null; then
    kvm_error="/dev/kvm is not writable"
  elif ! grep -qw -e vmx -e svm <(sed -n 's/^flags\s*: //p' /proc/cpuinfo); then
    kvm_error="no vmx or svm flag in /proc/cpuinfo"
  fi
  [[ -z ${kvm_error:-} ]] || fail "$kvm_exit" "KVM acceleration is not available ($kvm_error): add" \
    "--device /dev/kvm on a host with virtualisation enabled (KVM=N boots with TCG, very slowly)"
fi

# Disks: the VM never writes /System.qcow2 (it may be a shared read-only base); its writes go to an overlay
# in the container's writable layer that lives as long as the container, with the size of /System.qcow2.
# DISK_SIZE is a blank raw data disk kept in /storage (sparse), grown, never shrunk.
mkdir -p "$storage"
[[ -f /boot.qcow2 ]] || qemu-img create -q -f qcow2 -F qcow2 -b /System.qcow2 /boot.qcow2
data=$storage/data.img
if (( $(numfmt --from=iec "$DISK_SIZE") > $(stat -c %s "$data" 2>/dev/null || echo 0) )); then
  truncate -s "$DISK_SIZE" "$data"
fi

# Network: the guest sits on a bridge behind NAT; the container's forwarded ports are DNATed to it and a
# DHCP server gives it its fixed address. All of this needs NET_ADMIN. When it fails, the stand-in does what
# the official image does: it says so and falls back to user-mode networking, which forwards only ports 22 and
# 3389 (so port 5000 never answers).
nat_error() { echo "hcu-qemu: error: $*" >&2; return 1; }
nat_network() {
  if [[ ! -c /dev/net/tun ]]; then
    mkdir -p /dev/net
    mknod /dev/net/tun c 10 200 2>/dev/null || nat_error "cannot create /dev/net/tun: add --cap-add NET_ADMIN" \
      || return 1
  fi
  # A fixed address for the guest's gateway: a guest restored from a saved state keeps the neighbour it had
  ip link add dev hcubr0 address "$bridge_mac" type bridge 2>/dev/null \
    || nat_error "cannot create the guest's bridge: add --cap-add NET_ADMIN" || return 1
  ip address add "$bridge_ip/24" dev hcubr0 && ip link set hcubr0 up && ip tuntap add dev hcutap0 mode tap \
    && ip link set hcutap0 master hcubr0 up || return 1
  uplink=$(awk '$2 == "00000000" { print $1; exit }' /proc/net/route)
  [[ -n $uplink ]] || nat_error "no default route in the container" || return 1
  uplink_ip=$(ip -4 -o address show dev "$uplink" | awk '{ split($4, a, "/"); print a[1]; exit }')
  [[ $(</proc/sys/net/ipv4/ip_forward) == 1 ]] || sysctl -qw net.ipv4.ip_forward=1 \
    || nat_error "IP forwarding is off: add --sysctl net.ipv4.ip_forward=1" || return 1
  iptables -t nat -A POSTROUTING -s "$guest_ip" -o "$uplink" -j MASQUERADE \
    && iptables -t nat -A PREROUTING -i "$uplink" -d "$uplink_ip" -p tcp -m multiport \
      --dports "$forwarded_ports" -j DNAT --to-destination "$guest_ip" \
    || nat_error "cannot configure iptables for the guest's NAT" || return 1
  dnsmasq --interface=hcubr0 --bind-interfaces --except-interface=lo --dhcp-range="$guest_ip,$guest_ip" \
    --dhcp-option=option:router,"$bridge_ip" --dhcp-option=option:dns-server,"$bridge_ip" \
    --dhcp-leasefile=/run/dnsmasq.leases --pid-file=/run/dnsmasq.pid --log-facility=- \
    || nat_error "cannot start dnsmasq for the guest" || return 1
}
if nat_network; then
  netdev=tap,id=net0,ifname=hcutap0,script=no,downscript=no
else
  ip link delete hcutap0 2>/dev/null || true
  ip link delete hcubr0 2>/dev/null || true
  say "warning: falling back to user-mode networking (slow): only ports 22 and 3389 reach the guest"
  netdev="user,id=net0,net=${guest_ip%.*}.0/24,dhcpstart=$guest_ip,hostfwd=tcp::22-$guest_ip:22"
  netdev+=",hostfwd=tcp::3389-$guest_ip:3389"
fi

# Firmware: SeaBIOS (QEMU's default) boots the disk by BIOS; BOOT_MODE=uefi boots it with Debian's OVMF, its
# variables in /storage beside the data disk (a restored machine keeps the ones it was saved with in memory).
# OVMF cannot run on nested KVM without executable read-only memory slots (hcu's CI machine): KVM emulates OVMF's
# code from ROM and fails on its first FPU instruction; under TCG it runs.
firmware=()
if [[ $BOOT_MODE == uefi ]]; then
  [[ -f $storage/OVMF_VARS.fd ]] || cp /usr/share/OVMF/OVMF_VARS_4M.fd "$storage/OVMF_VARS.fd"
  firmware=(-drive if=pflash,format=raw,unit=0,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd
            -drive if=pflash,format=raw,unit=1,file="$storage/OVMF_VARS.fd")
fi
check_memory  # again, as the official image does just before QEMU
say "booting /System.qcow2: accel=$accel cpu=$CPU_MODEL cores=$CPU_CORES ram=$RAM_SIZE data disk=$DISK_SIZE" \
  "firmware=$BOOT_MODE"
read -ra extra_arguments <<<"${ARGUMENTS:-}"
# The VM's serial console is this container's log (the guest prints DESKTOP_READY there).
exec qemu-system-x86_64 -name hcu-guest -nodefaults -no-user-config \
  -machine q35,accel="$accel" -cpu "$CPU_MODEL" -smp "$CPU_CORES" -m "$RAM_SIZE" "${firmware[@]}" \
  -drive id=boot,if=none,format=qcow2,file=/boot.qcow2,discard=unmap,detect-zeroes=unmap \
  -device virtio-blk-pci,drive=boot,bootindex=1 \
  -drive id=data,if=none,format=raw,file="$data",discard=unmap,detect-zeroes=unmap \
  -device virtio-blk-pci,drive=data \
  -netdev "$netdev" \
  -device virtio-net-pci,netdev=net0,mac=52:54:00:12:34:56 \
  -device virtio-rng-pci \
  -vga std -display none -vnc 0.0.0.0:0,websocket=8006 \
  -chardev stdio,id=console,signal=off -serial chardev:console \
  -monitor none "${extra_arguments[@]}"
