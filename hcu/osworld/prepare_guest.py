"""`python -m hcu.osworld.prepare_guest CONFIG`: ahead of a campaign, this host's snapshot of every guest
configuration the run config's tasks use (guest_start "snapshot"): each booted once to ready and saved, so no
attempt of the campaign waits for a warm-up (guest_state/snapshots.py). A snapshot already there and valid is
kept. Prints one line per configuration.

Exit status: 0 every configuration has its snapshot, 1 one could not be made (its line says why), 2 a bad config
or one whose guests cannot start from a snapshot (one line).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from hcu.flags import OneLineParser
from hcu.osworld.guest.kinds import GuestSpec
from hcu.osworld.guest_state.snapshots import SnapshotCache, SnapshotConfig
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.run_config import ConfigError, load_config


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m hcu.osworld.prepare_guest", description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path)
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        parser.error(str(exc))
    specs = {SnapshotConfig.of(spec): spec for spec in
             (GuestSpec.for_settings(config.task_settings(task)) for task in config.tasks)}
    refusal = next(iter(specs.values())).guest_kind.snapshot_refusal
    if refusal is not None:
        parser.error(f"{args.config}: {refusal}")
    cache = SnapshotCache(config.snapshot_cache)
    failed = 0
    for snapshot_config, spec in specs.items():
        started = time.monotonic()
        lookup = cache.ensure(spec, AttemptId(run_id=str(config.run_id), task_id="prepare", attempt=1),
                              deadline=started + config.timeout_seconds if config.timeout_seconds else float("inf"))
        where = cache.folder / snapshot_config.name
        if lookup.entry is None:
            failed += 1
            print(f"prepare_guest: {where}: no snapshot ({lookup.reason})")
        else:
            made = f"built in {time.monotonic() - started:.1f} s" if lookup.built else "already there"
            print(f"prepare_guest: {where}: {made} ({lookup.entry.machine.bytes / 1e6:.0f} MB; ram "
                  f"{spec.ram_size}, {spec.cpu_cores} cores, volume {spec.volume_size_gb} GiB)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
