"""How many guests this host's memory admission (guest/memory.py) would let run at once, now: guests all starting
from here each need their share of the available memory, with the margin kept free once."""

from __future__ import annotations

import socket

from hcu.osworld.errors import ConfigurationError
from hcu.osworld.guest.host import gib, read_memory
from hcu.osworld.guest.memory import MARGIN
from hcu.osworld.quota.forecast import MemoryFit


def memory_fit(need: int) -> MemoryFit | None:
    """What fits of guests needing `need` bytes each (None: the host's meminfo cannot be read)."""
    try:
        memory = read_memory()
    except (OSError, ConfigurationError):
        return None
    attempts = max(0, (min(memory.available, memory.total) - MARGIN) // need)
    return MemoryFit(attempts, f"this host ({socket.gethostname()}): {gib(memory.available)} available, "
                               f"{gib(need)} per guest, {gib(MARGIN)} kept free")
