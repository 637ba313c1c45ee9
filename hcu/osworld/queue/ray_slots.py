"""The run's guest slots on a Ray cluster, as the ray executor's head holds them.

A slot is a detached placement group of one slot resource, named `slot:<run>/<token>`. A finished attempt's
slot goes to the run's next launch, on the node running the fewest of the run's attempts (so boots spread over
the nodes and their per-node caps); a slot no launch took by the next poll is removed, so a run holds no more
slots than it uses and leaves the rest of the cluster to others. Reuse is the point: Ray places a group created
just after another was removed only at its next retry, hundreds of milliseconds later, while a kept slot is
already placed.
"""

from __future__ import annotations

import contextlib
import secrets
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from ray.exceptions import RayError
from ray.util.placement_group import (
    PlacementGroup,
    get_placement_group,
    placement_group,
    placement_group_table,
    remove_placement_group,
)


@dataclass
class Slot:
    group: PlacementGroup
    holder: str | None = None
    """The key of the attempt holding it (None: free)."""
    ray_node_id: str | None = None
    """Where Ray placed it (None until known)."""
    freed_at: int = 0
    """The poll at which it was freed."""


class SlotPool:
    def __init__(self, run_id: str, slot_resource: str) -> None:
        self.prefix, self.slot_resource = f"slot:{run_id}/", slot_resource
        self.slots: dict[str, Slot] = {}
        self.polls = 0

    def name_for_launch(self, live_nodes: Iterable[str]) -> tuple[str, bool]:
        """(slot name, whether it is a free slot already placed on a live node) for the next launch; a new
        name when there is none (free slots placed elsewhere are removed)."""
        live = set(live_nodes)
        busy = Counter(slot.ray_node_id for slot in self.slots.values() if slot.holder is not None)
        for _, name in sorted((busy[slot.ray_node_id], name) for name, slot in self.slots.items()
                              if slot.holder is None):
            if self.slots[name].ray_node_id in live:
                return name, True
            self.remove(name)
        return f"{self.prefix}{secrets.token_hex(4)}", False

    def hold(self, name: str, holder: str) -> Slot:
        """The slot `name` (created now unless it is free here) held by the attempt `holder`."""
        if name not in self.slots:
            self.slots[name] = Slot(placement_group([{self.slot_resource: 1}], name=name, lifetime="detached"))
        slot = self.slots[name]
        slot.holder = holder
        return slot

    def adopt(self, name: str, holder: str, ray_node_id: str | None) -> PlacementGroup:
        """The slot a previous queue's attempt holds (ValueError: Ray has no such slot)."""
        group = get_placement_group(name)
        self.slots[name] = Slot(group, holder, ray_node_id)
        return group

    def placed(self, name: str, ray_node_id: str) -> None:
        self.slots[name].ray_node_id = ray_node_id

    def free(self, name: str) -> None:
        """Its attempt is done: the slot waits for the next launch."""
        self.slots[name].holder, self.slots[name].freed_at = None, self.polls

    def tick(self) -> None:
        """A new poll: slots freed before the last launches that did not take them are removed."""
        self.polls += 1
        for name in [name for name, slot in self.slots.items() if slot.holder is None and slot.freed_at < self.polls]:
            self.remove(name)

    def remove(self, name: str) -> None:
        slot = self.slots.pop(name, None)
        with contextlib.suppress(RayError, ValueError):  # already removed
            remove_placement_group(slot.group if slot else get_placement_group(name))

    def remove_free(self) -> None:
        for name in [name for name, slot in self.slots.items() if slot.holder is None]:
            self.remove(name)

    def remove_all_but(self, held: set[str]) -> None:
        """Remove every slot of the run that Ray still holds, but `held`."""
        for entry in placement_group_table().values():
            if entry["name"].startswith(self.prefix) and entry["state"] != "REMOVED" and entry["name"] not in held:
                self.remove(entry["name"])
