"""The asset source an attempt's settings ask for: the cache of real task files (downloading, offline or from a
mirror), or generated stand-ins (offline tests only; hcu/osworld/stand_ins is the only code that makes them).
Setup and evaluation receive the source and read files through it; they never know which one it is."""

from __future__ import annotations

from hcu.osworld.osworld_bridge.assets import AssetCache
from hcu.osworld.settings import AssetSettings, OSWorldSettings


class AssetSourceSettings(AssetSettings, OSWorldSettings):
    """What choosing a source reads."""


def asset_source(settings: AssetSourceSettings) -> AssetCache:
    """The source for resolved `settings`: stand-ins (marked, offline, default assets-stand-ins/, made by the
    OSWorld interpreter) with `asset_stand_ins`, else the asset cache."""
    if settings.asset_stand_ins:
        from hcu.osworld.stand_ins.source import StandInAssets

        return StandInAssets.at(settings.asset_cache, settings.osworld_python)
    return AssetCache.configured(settings.asset_cache, offline=settings.offline_assets, mirror=settings.asset_mirror)
