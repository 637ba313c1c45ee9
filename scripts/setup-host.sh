#!/usr/bin/env bash
# Debian packages hcu needs on the host, and a running Docker engine (started here if none answers).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
pkgs=(docker.io debootstrap qemu-utils python3-venv xvfb)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
  (dockerd >/var/log/hcu-dockerd.log 2>&1 &)
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { echo "setup-host: dockerd did not start, see /var/log/hcu-dockerd.log" >&2; exit 1; }
fi
# The default bridge must exist: guests reach the gateway at its address.
for _ in $(seq 1 20); do ip -4 addr show docker0 2>/dev/null | grep -q inet && break; sleep 0.5; done
# Guest APIs are unauthenticated: only the host may use them, never another guest (ten-problems #4). Guests
# may not talk to each other on the bridge, nor reach the guest ports the host publishes on the bridge address
# (hcu.osworld.guest.ports leases 20000-31999); the gateway's ports stay reachable.
if command -v iptables >/dev/null; then
  for rule in "DOCKER-USER -i docker0 -o docker0 -j DROP" "INPUT -i docker0 -p tcp --dport 20000:31999 -j REJECT"; do
    read -ra r <<<"$rule"
    iptables -C "${r[@]}" 2>/dev/null || iptables -I "${r[@]}"
  done
fi
