"""Whether a client is this host itself: its address is loopback or one the kernel owns here.

The kernel picks the source of a connection from this host to its own bridge address among all of the host's
addresses (here the uplink's, not the bridge's), so "the peer is the address it called" does not hold; "the
peer is an address of this host" does. A guest's address on the bridge is never one (a packet from outside
claiming a local source is dropped as martian). The kernel's own tables say which addresses are local:
`/proc/net/fib_trie` (IPv4 `host LOCAL` entries) and `/proc/net/if_inet6`.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from aiohttp import web

FIB_TRIE = Path("/proc/net/fib_trie")
IF_INET6 = Path("/proc/net/if_inet6")
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def from_this_host(request: web.Request) -> bool:
    transport = request.transport
    peer = transport.get_extra_info("peername") if transport is not None else None
    if not peer:
        return False
    address = _address(peer[0])
    return address.is_loopback or address in local_addresses()


def local_addresses() -> set[Address]:
    """This host's addresses now (read each time: Docker adds its bridge while the gateway runs)."""
    lines = _lines(FIB_TRIE)
    found: set[Address] = {ipaddress.IPv4Address(above.split("|--")[1].strip())
                           for above, line in zip(lines, lines[1:], strict=False)
                           if line.strip() == "/32 host LOCAL" and "|--" in above}
    return found | {ipaddress.IPv6Address(int(line.split()[0], 16)) for line in _lines(IF_INET6) if line.strip()}


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except OSError:  # no such table (no IPv6): no addresses from it
        return []


def _address(text: str) -> Address:
    address = ipaddress.ip_address(text.split("%")[0])
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped if mapped is not None else address
