#!/usr/bin/env bash
# Makes a bootable qcow2 of the test desktop: the root filesystem of the test desktop image exactly as built
# (applications, in-guest API server, user and password handling), plus Debian's kernel, systemd and the
# packages of vm-packages.txt; its start command becomes a systemd service. No loop or nbd mounts: the root
# filesystem is written with `mkfs.ext4 -d`, the GPT with sfdisk (run from the new root filesystem), GRUB's
# boot sector and core image with dd (patched as grub-install would), and the raw disk becomes a qcow2 with
# `qemu-img convert`.
# Layout: GPT, partition 1 the BIOS boot partition (GRUB's core image, its config embedded: vm/grub.cfg),
# partition 2 the ext4 root filesystem (label hcu-root) sized to its content plus some room, then unallocated
# space up to the virtual size, so hcu's growth step (growpart + resize2fs) has work to do. It boots with BIOS
# (SeaBIOS), not UEFI like the official image: see runner-entry.sh.
# usage: make-disk.sh TEST_DESKTOP_IMAGE OUT_QCOW2   (called by build.sh, which holds the build lock)
set -euo pipefail
desktop=${1:?usage: make-disk.sh TEST_DESKTOP_IMAGE OUT_QCOW2}
out=${2:?usage: make-disk.sh TEST_DESKTOP_IMAGE OUT_QCOW2}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=$repo/build/qemu-guest
debs=$cache/debs
virtual_size=${HCU_QEMU_GUEST_DISK_SIZE:-64G}  # hcu's default volume_size for OSWorld V1
core_sector=2048  # the BIOS boot partition: 1 MiB from sector 2048
root_sector=4096

work=$(mktemp -d "$cache/disk.XXXXXX")
root=$work/rootfs
container=""
cleanup() {
  umount "$root/var/cache/apt/archives" "$root/proc" 2>/dev/null || true
  [[ -z $container ]] || docker rm -f "$container" >/dev/null 2>&1 || true
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
step() { echo "make-disk: $1 ($((SECONDS - t0)) s)"; }
t0=$SECONDS

# 1. The test desktop's root filesystem and start command, as its image has them.
mkdir -p "$root" "$debs/partial"
container=$(docker create --label hcu.build=qemu-guest "$desktop")
docker export "$container" | tar -C "$root" --numeric-owner -x
docker rm "$container" >/dev/null
container=""
rm -f "$root/.dockerenv"
mkdir -p "$root/etc/systemd/system"
cat >"$root/etc/systemd/system/hcu-desktop.service" <<UNIT
# The test desktop's container command as a service (generated from the $desktop image's config).
[Unit]
Description=hcu test desktop: session and in-guest API server
After=local-fs.target
[Service]
$(docker image inspect -f '{{range .Config.Env}}Environment="{{.}}"{{println}}{{end}}' "$desktop")
WorkingDirectory=$(docker image inspect -f '{{.Config.WorkingDir}}' "$desktop")
ExecStart=$(docker image inspect -f '{{range .Config.Entrypoint}}{{.}} {{end}}{{range .Config.Cmd}}{{.}} {{end}}' "$desktop")
StandardOutput=journal+console
StandardError=journal+console
[Install]
WantedBy=multi-user.target
UNIT
step "exported $desktop"

# 2. Kernel, init and the growth tools (vm-packages.txt); a small initramfs (vm/initramfs.conf).
mkdir -p "$root/etc/initramfs-tools/conf.d"
install -m 644 "$here/vm/initramfs.conf" "$root/etc/initramfs-tools/conf.d/hcu.conf"
install -m 644 "$here/vm/initramfs-modules" "$root/etc/initramfs-tools/modules"
cp /etc/resolv.conf "$root/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"  # no daemons start in the chroot
chmod 755 "$root/usr/sbin/policy-rc.d"
mount -t proc proc "$root/proc"
mount --bind "$debs" "$root/var/cache/apt/archives"
chroot "$root" apt-get update -q >"$work/apt.log" 2>&1 \
  || { tail -20 "$work/apt.log" >&2; echo "make-disk: apt-get update failed" >&2; exit 1; }
mapfile -t pkgs < <(grep -v '^#' "$here/vm-packages.txt" | tr ' ' '\n' | grep -v '^$')
chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  "${pkgs[@]}" >>"$work/apt.log" 2>&1 \
  || { tail -30 "$work/apt.log" >&2; echo "make-disk: apt-get install failed" >&2; exit 1; }
umount "$root/var/cache/apt/archives"
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root/usr/sbin/policy-rc.d"
[[ -e $root/vmlinuz && -e $root/initrd.img ]] || { echo "make-disk: no /vmlinuz or /initrd.img after install" >&2; exit 1; }
step "installed $(echo "${pkgs[@]}" | wc -w) packages"

# 3. Boot configuration: fstab, network, hostname, the desktop service.
install -m 644 "$here/vm/fstab" "$root/etc/fstab"
install -m 644 "$here/vm/80-hcu-dhcp.network" "$root/etc/systemd/network/80-hcu-dhcp.network"
echo hcu-guest >"$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 hcu-guest\n' >"$root/etc/hosts"
ln -sf ../run/systemd/resolve/stub-resolv.conf "$root/etc/resolv.conf"
chroot "$root" systemctl enable -q systemd-networkd systemd-resolved hcu-desktop.service
chroot "$root" systemctl set-default -q multi-user.target
grep -v '^#' "$here/vm/masked-units" | xargs chroot "$root" systemctl mask -q

# 4. GRUB for BIOS: one core image that finds the root filesystem by label and boots its kernel.
install -m 644 "$here/vm/grub.cfg" "$root/tmp/hcu-grub.cfg"
chroot "$root" grub-mkimage -O i386-pc -o /tmp/hcu-core.img -p /boot/grub -c /tmp/hcu-grub.cfg \
  biosdisk part_gpt ext2 search search_label linux boot
mv "$root/tmp/hcu-core.img" "$work/core.img"
cp "$root/usr/lib/grub/i386-pc/boot.img" "$work/boot.img"
rm "$root/tmp/hcu-grub.cfg"
umount "$root/proc"
step "boot configuration and GRUB"

# 5. The root filesystem: its content plus a quarter and 512 MiB of room, far below the virtual size.
used_mib=$(du -s --block-size=1M "$root" | cut -f1)
root_mib=$(( (used_mib * 5 / 4 + 512 + 63) / 64 * 64 ))
mkfs.ext4 -q -L hcu-root -d "$root" "$work/root.img" "${root_mib}M" >/dev/null
step "root filesystem: ${used_mib} MiB of files in a ${root_mib} MiB ext4"

# 6. The partitioned disk (GPT; sfdisk from the new root filesystem, the disk moved in and out by rename).
truncate -s "$virtual_size" "$work/disk.raw"
mv "$work/disk.raw" "$root/disk.raw"
chroot "$root" sfdisk -q /disk.raw >/dev/null <<LAYOUT
label: gpt
start=$core_sector, size=$((root_sector - core_sector)), type=21686148-6449-6E6F-744E-656564454649, name="BIOS boot"
start=$root_sector, size=$((root_mib << 11)), type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name="hcu-root"
LAYOUT
mv "$root/disk.raw" "$work/disk.raw"
dd if="$work/root.img" of="$work/disk.raw" bs=1M seek=$((root_sector / 2048)) conv=notrunc,sparse status=none
# What grub-install does for i386-pc: the boot sector's code (the GPT's protective MBR keeps its partition
# table) jumps to core.img's first sector, which loads the rest from the blocklist at its end.
python3 - "$work/disk.raw" "$work/boot.img" "$work/core.img" "$core_sector" "$root_sector" <<'PATCH'
import struct, sys
disk, boot_img, core_img, core_sector, root_sector = sys.argv[1:]
boot = bytearray(open(boot_img, "rb").read()[:440])
core = bytearray(open(core_img, "rb").read())
core_sector, room = int(core_sector), (int(root_sector) - int(core_sector)) * 512
assert len(core) <= room, f"core.img is {len(core)} bytes, the BIOS boot partition {room}"
struct.pack_into("<Q", boot, 0x5C, core_sector)  # GRUB_BOOT_MACHINE_KERNEL_SECTOR
boot[0x66:0x68] = b"\x90\x90"  # GRUB_BOOT_MACHINE_DRIVE_CHECK: a hard disk, trust the BIOS's drive number
_, length = struct.unpack_from("<QH", core, 0x200 - 12)  # the blocklist grub-mkimage filled
assert length == (len(core) + 511) // 512 - 1, f"unexpected core.img blocklist length {length}"
struct.pack_into("<Q", core, 0x200 - 12, core_sector + 1)
with open(disk, "r+b") as f:
    f.write(boot)
    f.seek(core_sector * 512)
    f.write(core)
PATCH

# 7. qcow2 (zeros are not stored).
qemu-img convert -f raw -O qcow2 "$work/disk.raw" "$out.tmp"
mv "$out.tmp" "$out"
step "wrote $out"
