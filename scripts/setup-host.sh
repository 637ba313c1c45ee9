#!/usr/bin/env bash
# What hcu needs on a Debian 12 host, as root: Debian packages, a running Docker engine (started here if none
# answers) and the guest-isolation iptables rules. Idempotent: a second run installs and adds nothing.
#
# iptables (host-wide, in the host's network namespace; each is added once, checked with `iptables -C`):
#   DOCKER-USER -i docker0 -o docker0 -j DROP                    guests may not talk to each other on the bridge
#   INPUT -i docker0 -p tcp --dport 20000:31999 -j REJECT        nor reach the guest API ports the host publishes
#                                                                 on the bridge address (hcu.osworld.guest.ports leases)
# The gateway's ports stay reachable from guests. Guest APIs are unauthenticated, so without these rules one
# guest can drive another: a host where they cannot be added (a container without NET_ADMIN) fails here,
# unless HCU_SKIP_IPTABLES=1 says that the operator isolates the guests some other way.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

# python3-venv: the venv; docker.io: the engine; iptables, iproute2: isolation and the bridge address;
# debootstrap: the test desktop's base; qemu-utils: qcow2 overlays of the official guest; xvfb: a display;
# libatomic1: the node binary inside PyPI's playwright wheel (OSWorld's setup code drives Chrome with it);
# gcc, python3-dev, linux-libc-dev: evdev (pynput's, in the evaluator venv) has no wheel and builds against the
# kernel's input headers; chromium, chromium-driver: the run viewer's pages are tested in headless Chromium
# (selenium drives /usr/bin/chromedriver; no browser download).
pkgs=(python3-venv docker.io iptables iproute2 debootstrap qemu-utils xvfb libatomic1 gcc python3-dev linux-libc-dev
      chromium chromium-driver)
# npm packs the agent CLIs; a node that is already installed (any origin, e.g. nodesource) is kept.
command -v npm >/dev/null || pkgs+=(nodejs npm)
missing=()
for p in "${pkgs[@]}"; do
  [[ "$(dpkg-query -W -f '${db:Status-Status}' "$p" 2>/dev/null)" == installed ]] || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup-host: installing ${missing[*]}"
  timeout 600 apt-get update -qq
  timeout 1800 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  (dockerd >/var/log/hcu-dockerd.log 2>&1 &)
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { echo "setup-host: dockerd did not start, see /var/log/hcu-dockerd.log" >&2; exit 1; }
fi
# The default bridge must exist: guests reach the gateway at its address.
for _ in $(seq 1 20); do ip -4 addr show docker0 2>/dev/null | grep -q inet && break; sleep 0.5; done
ip -4 addr show docker0 2>/dev/null | grep -q inet \
  || { echo "setup-host: the Docker bridge docker0 has no IPv4 address (guests reach the gateway there)" >&2; exit 1; }

if [[ "${HCU_SKIP_IPTABLES:-}" == 1 ]]; then
  echo "setup-host: HCU_SKIP_IPTABLES=1: guest-isolation iptables rules not checked (the operator's firewall isolates guests)"
  exit 0
fi
for rule in "DOCKER-USER -i docker0 -o docker0 -j DROP" "INPUT -i docker0 -p tcp --dport 20000:31999 -j REJECT"; do
  read -ra r <<<"$rule"
  iptables -C "${r[@]}" 2>/dev/null || iptables -I "${r[@]}" 2>/dev/null || {
    echo "setup-host: cannot add iptables rule '$rule' (needs root with NET_ADMIN); set HCU_SKIP_IPTABLES=1 only if guests are isolated otherwise" >&2
    exit 1
  }
done
