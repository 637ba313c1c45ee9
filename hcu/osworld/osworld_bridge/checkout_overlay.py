"""What an OSWorld checkout calls once `scripts/install-osworld-v2.py` has patched it.

The patched checkout imports `desktop_env/hcu_overlay.py`, which forwards here when hcu is importable and
falls back to upstream behaviour when it is not. Two hooks:

- `prefill_download(url, target)`: before OSWorld downloads `url` to its own cache file `target`, fill the
  file from hcu's asset cache (downloading into the cache on a miss), so OSWorld then finds it and skips its
  own download. Configured by `HCU_ASSET_CACHE` (default `assets/`), `HCU_OFFLINE_ASSETS=1` and
  `HCU_ASSET_MIRROR`.
- `connect_over_cdp(chromium, url)`: Playwright's `connect_over_cdp` with bounded backoff, so a Chrome that
  is still starting (or briefly busy) is waited for instead of making OSWorld launch a second browser.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hcu.defaults import RETRIES, Backoff
from hcu.osworld.osworld_bridge.assets import AssetCache, is_url
from hcu.osworld.osworld_bridge.setup import place

ASSET_CACHE_ENV = "HCU_ASSET_CACHE"
OFFLINE_ASSETS_ENV = "HCU_OFFLINE_ASSETS"


def configured_cache() -> AssetCache:
    root = os.environ.get(ASSET_CACHE_ENV)
    offline = os.environ.get(OFFLINE_ASSETS_ENV, "").strip().lower() in ("1", "true", "yes")
    return AssetCache.configured(Path(root) if root else None, offline=offline)


def prefill_download(url: str, target: str) -> None:
    """Fill OSWorld's cache file `target` for `url` from the asset cache; a no-op if it is already there."""
    if not url or not is_url(url) or os.path.exists(target):
        return
    place(configured_cache().resolve(url), Path(target))


def connect_over_cdp(chromium: Any, url: str, *, backoff: Backoff = RETRIES.chrome_cdp) -> Any:
    """`chromium.connect_over_cdp(url)`, tried again with exponential backoff within `backoff`'s tries and
    total time; the last error propagates to OSWorld's own handling."""
    return backoff.retrying()(chromium.connect_over_cdp, url)
