"""The Docker bridge address: this host as the guests see it, where guest ports and the gateways bind."""

from __future__ import annotations

import contextlib
import fcntl
import socket
import struct

import docker

from hcu.osworld.errors import GuestError
from hcu.osworld.guest.docker_engine import docker_client, engine_calls


def bridge_address(client: docker.DockerClient | None = None) -> str:
    """The default bridge's gateway: this host as the guests see it (where ports and the gateway bind).

    Docker 20.10 leaves the default bridge's IPAM gateway empty; then it is the address of the bridge
    interface itself (docker0), read from the local kernel."""
    with engine_calls("the docker bridge's address"), contextlib.ExitStack() as stack:
        if client is None:
            client = stack.enter_context(contextlib.closing(docker_client()))
        attrs = client.networks.get("bridge").attrs
    gateways = [c["Gateway"] for c in attrs["IPAM"]["Config"] or [] if c.get("Gateway")]
    if gateways:
        return gateways[0]
    interface = (attrs.get("Options") or {}).get("com.docker.network.bridge.name", "docker0")
    return _interface_ipv4(interface)


def _interface_ipv4(interface: str) -> str:
    siocgifaddr = 0x8915  # <linux/sockios.h>
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            packed = fcntl.ioctl(sock.fileno(), siocgifaddr, struct.pack("256s", interface.encode()[:15]))
        except OSError as exc:
            raise GuestError(f"cannot read the address of the docker bridge {interface}: {exc}") from None
    return socket.inet_ntoa(packed[20:24])
