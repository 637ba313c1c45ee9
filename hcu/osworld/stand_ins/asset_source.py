"""The asset source an attempt's settings ask for: the cache of real task files (downloading, offline or from a
mirror), or generated stand-ins (offline tests only; this room is the only code that makes them). The commands
that start attempts (run_task, setup_canary, the canary sweep) hand it to the attempt runner, whose load phase
asks it for the attempt's resolved settings; setup and evaluation read files through the source it returns and
never know which one it is."""

from __future__ import annotations

from hcu.osworld.osworld_bridge.assets import AssetCache
from hcu.osworld.settings import GuestAttemptSettings
from hcu.osworld.stand_ins.source import StandInAssets


def asset_source(settings: GuestAttemptSettings) -> AssetCache:
    """The source for resolved `settings`: stand-ins (marked, offline, default assets-stand-ins/, made by the
    OSWorld interpreter) with `asset_stand_ins`, else the asset cache."""
    if settings.asset_stand_ins:
        return StandInAssets.at(settings.asset_cache, settings.osworld_python)
    return AssetCache.configured(settings.asset_cache, offline=settings.offline_assets, mirror=settings.asset_mirror)
