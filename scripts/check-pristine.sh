#!/usr/bin/env bash
# The README's promise, checked: `make TARGET` as root on a pristine Debian 12 that has only
# `make git python3 ca-certificates`, in a fresh container, on a git clone of REPO's committed state (REF).
# usage: scripts/check-pristine.sh [TARGET [REPO [REF]]]     (defaults: demo, this checkout, HEAD)
#
# The image: Debian bookworm from Debian's archive (debootstrap --variant=minbase with the mirror this host's
# apt uses, HCU_DEBIAN_MIRROR overrides it; the same suites as the host's apt sources), `docker import`ed, then
# `apt-get install make git python3 ca-certificates` inside, as a user would. Built once, reused while its
# label hcu.pristine.rev (a hash of the recipe below and the mirror) matches; no registry image is pulled.
#
# The run: a fresh container from that image, as root, with
#   - the host's Docker socket (this container runs no engine of its own): setup-host.sh installs docker.io
#     there and finds the host's engine answering, so it starts none; images, guests and the test desktop image
#     are the host's (scripts/test-desktop/build.sh finds the host's hcu-test-desktop image with the same rev
#     label and skips the build);
#   - --network host: guests reach the gateway at the Docker bridge address, which must be local to the run;
#   - NET_ADMIN: setup-host.sh checks/adds its guest-isolation iptables rules in the host's namespace (the same
#     rules the host already has, so nothing changes); /dev/kvm for QEMU guests.
# The checkout lives in a host folder (HCU_PRISTINE_DIR, default /work/pristine-run) mounted at the same path,
# so any path the run hands to the host's engine is valid there too; no shared/ lies beside it, as on a user's
# machine. Each run clones afresh (HCU_PRISTINE_KEEP=1 reuses the previous clone's untracked files: venv,
# artifacts, build cache).
#
# Registries: the container reaches Debian's archive, PyPI and npm over the host's network. Here that network
# intercepts TLS with a CA of its own, which this host trusts (its local CAs, /usr/local/share/ca-certificates)
# and a pristine Debian does not: pip then fails with CERTIFICATE_VERIFY_FAILED. So when the host has local CAs,
# the run adds them to the container's trust store (update-ca-certificates) before `make`, and nothing more:
# Debian's pip, the venv's pip and Debian's npm all use that store. None of this host's pip, npm or apt
# configuration enters the container (/etc/pip.conf, /etc/xdg/pip's constraints and root's find-links to local
# wheel folders are not needed). HCU_PRISTINE_HOST_CA=0 leaves the store pristine (a host with direct access).
set -euo pipefail

target=${1:-demo}
repo=$(cd "${2:-$(dirname "$0")/..}" && pwd)
ref=$(git -C "$repo" rev-parse --verify "${3:-HEAD}^{commit}")
dir=${HCU_PRISTINE_DIR:-/work/pristine-run}
checkout=$dir/hcu
image=hcu-pristine-debian12:latest

for tool in debootstrap docker git; do
  command -v "$tool" >/dev/null || { echo "check-pristine: $tool missing (run scripts/setup-host.sh)" >&2; exit 2; }
done
mirror=${HCU_DEBIAN_MIRROR:-$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null \
  | awk '$2 == "bookworm" { print $1; exit }')}
[[ -n "$mirror" ]] || { echo "check-pristine: no bookworm archive in apt's sources (set HCU_DEBIAN_MIRROR)" >&2; exit 2; }

# The archives a Debian 12 install lists: bookworm, -updates and -security, from where this host's apt has them.
apt_sources() {
  apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null | awk '$2 ~ /^bookworm(-updates|-security)?$/' \
    | LC_ALL=C sort -u | awk '{ print "deb " $1 " " $2 " main" }'
}

build_image() (  # $1 = rev label; a subshell, so its EXIT trap cleans up
  work=$(mktemp -d /var/tmp/hcu-pristine.XXXXXX)
  trap 'rm -rf --one-file-system "$work"; docker rm -f "hcu-pristine-build-$$" >/dev/null 2>&1 || true' EXIT
  echo "check-pristine: debootstrap bookworm from $mirror"
  timeout 1800 debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; echo "check-pristine: debootstrap failed" >&2; exit 1; }
  if [[ -z "${HCU_DEBIAN_MIRROR:-}" ]]; then apt_sources >"$work/rootfs/etc/apt/sources.list"; fi
  rm -f "$work/rootfs/etc/resolv.conf" "$work/rootfs/etc/hostname"
  tar -C "$work/rootfs" --numeric-owner -c . | docker import - "hcu-pristine-debian12:base" >/dev/null
  docker run --name "hcu-pristine-build-$$" --network host -e DEBIAN_FRONTEND=noninteractive \
    hcu-pristine-debian12:base sh -c 'apt-get update -q && apt-get install -y -q make git python3 ca-certificates' \
    >"$work/apt.log" 2>&1 || { tail -30 "$work/apt.log" >&2; echo "check-pristine: apt-get install failed" >&2; exit 1; }
  docker commit -c "LABEL hcu.pristine.rev=$1" -c 'CMD ["bash"]' "hcu-pristine-build-$$" "$image" >/dev/null
  docker rm "hcu-pristine-build-$$" >/dev/null && docker image rm hcu-pristine-debian12:base >/dev/null
  echo "check-pristine: built $image (rev $1)"
)

rev=$({ declare -f build_image apt_sources; echo "$mirror"; } | sha256sum | cut -c1-16)
if [[ "$(docker image inspect -f '{{index .Config.Labels "hcu.pristine.rev"}}' "$image" 2>/dev/null)" != "$rev" ]]; then
  build_image "$rev"
fi

mkdir -p "$dir"
if [[ "${HCU_PRISTINE_KEEP:-}" == 1 && -d "$checkout/.git" ]]; then
  git -C "$checkout" fetch -q "$repo" "$ref"
  git -C "$checkout" checkout -q --detach "$ref"
else
  rm -rf --one-file-system "$checkout"
  git clone -q "$repo" "$checkout"
  git -C "$checkout" checkout -q --detach "$ref"
fi
echo "check-pristine: make $target in $image on $(git -C "$checkout" log --oneline -1)"

extra=()
[[ -e /dev/kvm ]] && extra+=(--device /dev/kvm)
if [[ "${HCU_PRISTINE_HOST_CA:-1}" == 1 ]] && compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
  extra+=(-v /usr/local/share/ca-certificates:/usr/local/share/ca-certificates:ro)
fi
t0=$SECONDS
status=0
docker run --rm --init --name "hcu-pristine-$$" --network host --cap-add NET_ADMIN "${extra[@]}" \
  -v /var/run/docker.sock:/var/run/docker.sock -v "$dir:$dir" -w "$checkout" \
  "$image" sh -c 'update-ca-certificates >/dev/null 2>&1 || { echo "update-ca-certificates failed" >&2; exit 1; }
                exec make "$1"' sh "$target" || status=$?
echo "check-pristine: make $target exited $status after $((SECONDS - t0)) s"
exit "$status"
