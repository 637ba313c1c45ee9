#!/usr/bin/env bash
# Builds the QEMU runner image: Debian bookworm (debootstrap minbase) with QEMU, OVMF, qemu-img and the
# network tools of runner-packages.txt, plus runner-entry.sh as its command (no registry, no Dockerfile).
# Two tags of one image: REPO:latest boots with KVM, REPO:tcg asks for TCG (ENV KVM=N), for machines whose
# /dev/kvm cannot run a stock kernel (see README.md).
# The root filesystem with the packages is cached as build/qemu-guest/runner-<hash>.tar, keyed by
# runner-packages.txt and this script, so changing only the entry script re-imports in seconds.
# usage: make-runner.sh REPO REV   (called by build.sh, which holds the build lock)
set -euo pipefail
repo_name=${1:?usage: make-runner.sh REPO REV}
rev=${2:?usage: make-runner.sh REPO REV}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=$repo/build/qemu-guest
debs=$cache/debs
mirror=${HCU_DEBIAN_MIRROR:-$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null \
  | awk '$2 == "bookworm" { print $1; exit }')}

work=$(mktemp -d "$cache/runner.XXXXXX")
root=$work/rootfs
cleanup() {
  umount "$root/var/cache/apt/archives" "$root/proc" 2>/dev/null || true
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

base=$cache/runner-$(cd "$here" && sha256sum runner-packages.txt make-runner.sh | sha256sum | cut -c1-16).tar
if [[ ! -f $base ]]; then
  [[ -n "$mirror" ]] || { echo "make-runner: no bookworm archive in apt's sources (set HCU_DEBIAN_MIRROR)" >&2; exit 1; }
  t0=$SECONDS
  mkdir -p "$debs/partial" "$root"
  debootstrap --variant=minbase --cache-dir="$debs" bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; echo "make-runner: debootstrap failed" >&2; exit 1; }
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"  # no daemons start in the chroot
  chmod 755 "$root/usr/sbin/policy-rc.d"
  mount -t proc proc "$root/proc"
  mount --bind "$debs" "$root/var/cache/apt/archives"
  mapfile -t pkgs < <(grep -v '^#' "$here/runner-packages.txt" | tr ' ' '\n' | grep -v '^$')
  chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${pkgs[@]}" >"$work/apt.log" 2>&1 \
    || { tail -30 "$work/apt.log" >&2; echo "make-runner: apt-get install failed" >&2; exit 1; }
  umount "$root/var/cache/apt/archives" "$root/proc"
  chroot "$root" apt-get clean
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root/usr/sbin/policy-rc.d" \
    "$root"/usr/share/{doc,man,info}/* "$root/etc/resolv.conf" "$root/etc/hostname"
  tar -C "$root" --numeric-owner -cf "$base.tmp" .
  mv "$base.tmp" "$base"
  find "$cache" -maxdepth 1 -name 'runner-*.tar' ! -path "$base" -delete  # keep one base only
  echo "make-runner: base root filesystem in $((SECONDS - t0)) s"
  rm -rf --one-file-system "$root"
fi

mkdir -p "$root"
tar -C "$root" -xf "$base"
install -m 755 "$here/runner-entry.sh" "$root/usr/local/bin/hcu-qemu-entry"
# VOLUME /storage as in the official image: a bare `docker run` gets an anonymous volume there (hcu mounts
# a labelled named volume instead). Every tag imports the same tar stream, so they share one layer: :tcg asks for
# TCG, :uefi boots with OVMF (the official Ubuntu qcow2 boots by UEFI only), :uefi-tcg both.
for tag in latest tcg uefi uefi-tcg; do
  environment=()
  [[ $tag == *tcg ]] && environment+=(-c 'ENV KVM=N')
  [[ $tag == uefi* ]] && environment+=(-c 'ENV BOOT_MODE=uefi')
  tar -C "$root" --numeric-owner -c . | docker import "${environment[@]}" \
    -c 'EXPOSE 5000 8006 8080 9222' \
    -c 'VOLUME /storage' \
    -c "LABEL hcu.qemu_runner.rev=$rev" \
    -c 'CMD ["/usr/local/bin/hcu-qemu-entry"]' \
    - "$repo_name:$tag" >/dev/null
done
for old in $(docker images -q -f dangling=true -f label=hcu.qemu_runner.rev); do
  docker image rm "$old" >/dev/null 2>&1 || true
done
