#!/usr/bin/env bash
# Builds hcu's QEMU stand-in for the official OSWorld guest: the runner image (a container with the
# `happysixd/osworld-docker` contract: QEMU on /dev/kvm booting /System.qcow2) and a bootable qcow2 of the
# test desktop (same root filesystem, applications, API server and user as `hcu-test-desktop`), built from
# Debian packages without loop or nbd mounts. Prints build time and sizes.
# usage: build.sh RUNNER_REPO QCOW2_PATH [TEST_DESKTOP_IMAGE]
# The runner is tagged RUNNER_REPO:latest (KVM) and RUNNER_REPO:tcg (asks for TCG: ENV KVM=N).
# Skip-if-current: the runner image carries the label hcu.qemu_runner.rev (a hash of its files); the qcow2 has
# a QCOW2_PATH.rev beside it (a hash of the test desktop image id and the disk's files). What is current is
# left alone; the test desktop must already exist (make test-desktop). Outputs move only when a build succeeded.
set -euo pipefail
runner=${1:?usage: build.sh RUNNER_REPO QCOW2_PATH [TEST_DESKTOP_IMAGE]}
qcow2=${2:?usage: build.sh RUNNER_REPO QCOW2_PATH [TEST_DESKTOP_IMAGE]}
desktop=${3:-hcu-test-desktop:latest}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=$repo/build/qemu-guest
t0=$SECONDS

mkdir -p "$cache" "$(dirname "$qcow2")"
exec 9>"$cache/.lock"
flock 9  # one build at a time (make, CI and the tests may all ask for it)

# Leftovers of a build that was killed (the lock says no other build is running).
for stale in "$cache"/runner.* "$cache"/disk.*; do
  [[ -d $stale ]] || continue
  umount "$stale"/rootfs/{var/cache/apt/archives,proc} 2>/dev/null || true
  rm -rf --one-file-system "$stale"
done

hash_of() { (cd "$here" && sha256sum "$@" | sha256sum | cut -c1-16); }

runner_rev=$(hash_of runner-packages.txt runner-entry.sh make-runner.sh)
current=$(docker image inspect -f '{{index .Config.Labels "hcu.qemu_runner.rev"}}' "$runner:latest" "$runner:tcg" \
  "$runner:uefi" "$runner:uefi-tcg" 2>/dev/null | sort -u || true)
if [[ $current == "$runner_rev" ]]; then
  echo "build.sh: $runner:latest, :tcg, :uefi and :uefi-tcg are current (rev $runner_rev)"
else
  t1=$SECONDS
  bash "$here/make-runner.sh" "$runner" "$runner_rev"
  echo "build.sh: built $runner:latest, :tcg, :uefi and :uefi-tcg (rev $runner_rev) in $((SECONDS - t1)) s"
fi

desktop_id=$(docker image inspect -f '{{.Id}}' "$desktop" 2>/dev/null) \
  || { echo "build.sh: $desktop not found: build it first (make test-desktop)" >&2; exit 1; }
disk_rev=$( (echo "$desktop_id"; cd "$here" && sha256sum vm-packages.txt make-disk.sh vm/*) | sha256sum | cut -c1-16)
if [[ -f $qcow2 && -f $qcow2.rev && $(<"$qcow2.rev") == "$disk_rev" ]]; then
  echo "build.sh: $qcow2 is current (rev $disk_rev)"
else
  t1=$SECONDS
  bash "$here/make-disk.sh" "$desktop" "$qcow2"
  echo "$disk_rev" >"$qcow2.rev"
  echo "build.sh: built $qcow2 (rev $disk_rev) in $((SECONDS - t1)) s"
fi

runner_mb=$(( $(docker image inspect -f '{{.Size}}' "$runner:latest") / 1000000 ))
qcow2_mb=$(( $(stat -c %s "$qcow2") / 1000000 ))
virtual_gib=$(( $(qemu-img info -U --output=json "$qcow2" | sed -n 's/.*"virtual-size": \([0-9]*\).*/\1/p') >> 30 ))
echo "build.sh: runner image $runner_mb MB; qcow2 $qcow2_mb MB on disk, $virtual_gib GiB virtual; $((SECONDS - t0)) s in all"
