"""The asset source setup and evaluation read task files from: a cache of files keyed by URL at
`<cache>/<host>/<url path>`, downloaded once.

Two tasks that miss the same file at once share one download (a file lock per asset); the file appears by
atomic rename, so a reader sees it whole or not at all. With `offline` a miss fails with one line naming the
URL and the cache path, and nothing is fetched.

`mirror` (flag `--asset-mirror`, env `HCU_ASSET_MIRROR`) fetches misses from `<mirror>/<host>/<url path>`
instead of the original URL, i.e. from any HTTP server that serves a copy of an asset cache folder. The cache
path still comes from the original URL, so a mirror-filled cache is the same cache.

Stand-ins (flag `--asset-stand-ins`, for offline tests only) are a source of their own (hcu/osworld/stand_ins,
the only code that makes them), in a cache marked by a file at its root: generated files are never mixed into a
cache of real ones, and whatever ran on a marked cache is marked too (reports, result.json), so run_queue and
summarize can refuse it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

import requests
from filelock import FileLock
from pydantic import BaseModel, ConfigDict

from hcu.defaults import ASSET_CACHE_DIR, RETRIES
from hcu.osworld.errors import HcuOSWorldError
from hcu.osworld.osworld_bridge.tasks import TaskDefinition

STAND_IN_MARKER = "STAND-INS.txt"
"""A cache holding generated stand-ins has this file at its root."""
ASSET_MIRROR_ENV = "HCU_ASSET_MIRROR"
LOCKS_DIR = ".locks"
CONNECT_TIMEOUT_SEC = 10.0
CHUNK_BYTES = 1 << 20


class AssetError(HcuOSWorldError):
    """An asset could not be resolved: offline miss, bad URL, or a failed download."""


class OfflineAssetMiss(AssetError):
    """offline_assets is on and the cache lacks a file: every attempt would miss it the same way (the runner
    makes it a configuration failure)."""


def is_url(source: str) -> bool:
    return urlsplit(source).scheme in ("http", "https")


def cache_path(cache: Path, url: str) -> Path:
    """`<cache>/<host>/<url path>`; the query string is not part of the key (OSWorld's only query,
    `?download=true`, does not change the file)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AssetError(f"asset url: expected http(s)://host/path, got {url!r}")
    segments = [unquote(s) for s in PurePosixPath(parts.path).parts if s != "/"]
    if not segments or any(s in ("", ".", "..") or "/" in s or s.startswith(".") for s in segments):
        raise AssetError(f"asset url {url!r}: its path cannot name a file in the asset cache")
    host = parts.hostname if parts.port is None else f"{parts.hostname}_{parts.port}"
    return Path(cache, host, *segments)


def holds_stand_ins(root: Path) -> bool:
    """True when `root` is a stand-in cache (its marker file is there)."""
    return (Path(root) / STAND_IN_MARKER).is_file()


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, (requests.ConnectionError, requests.Timeout)):
        return True
    response = getattr(exc, "response", None)
    return isinstance(exc, requests.HTTPError) and response is not None and response.status_code >= 500


class AssetCache(BaseModel):
    model_config = ConfigDict(frozen=True)

    root: Path = ASSET_CACHE_DIR
    offline: bool = False
    mirror: str | None = None
    read_timeout_sec: float = 120.0
    """Longest silence between two chunks of a download (the whole download is bounded by the step)."""
    stand_ins: bool = False
    """The cache holds generated stand-ins, not the tasks' real files: whatever runs on it is marked."""

    @classmethod
    def configured(cls, root: Path | None, *, offline: bool, mirror: str | None = None) -> AssetCache:
        """The cache a run configures; `mirror` defaults to `$HCU_ASSET_MIRROR`; a marked folder is a stand-in
        cache, and whatever runs on it is marked."""
        root = root if root is not None else ASSET_CACHE_DIR
        return cls(
            root=root,
            offline=offline,
            mirror=mirror if mirror is not None else (os.environ.get(ASSET_MIRROR_ENV) or None),
            stand_ins=holds_stand_ins(root),
        )

    def prepare(self, task: TaskDefinition) -> None:
        """Called before setup and evaluation read the task's files; a cache of real files has nothing to do."""

    def fetch_url(self, url: str) -> str:
        """Where a miss is downloaded from: the URL itself, or its place on the mirror."""
        if not self.mirror:
            return url
        relative = cache_path(Path("."), url).as_posix()
        return f"{self.mirror.rstrip('/')}/{relative}"

    def resolve(self, source: str) -> Path:
        """The local file for a task source: a local path as is, an HTTP(S) URL through the cache."""
        if not is_url(source):
            return Path(source)
        path = cache_path(self.root, source)
        if path.is_file():
            return path
        if self.offline:
            raise OfflineAssetMiss(
                f"asset {source} is not in the asset cache at {path} (offline_assets forbids downloading)"
            )
        lock_name = hashlib.sha256(str(path).encode()).hexdigest() + ".lock"
        (self.root / LOCKS_DIR).mkdir(parents=True, exist_ok=True)
        with FileLock(self.root / LOCKS_DIR / lock_name):
            if not path.is_file():  # another process may have fetched it while we waited
                try:
                    RETRIES.asset_download.retrying(_retryable)(self._download, self.fetch_url(source), path)
                except requests.RequestException as exc:
                    raise AssetError(f"asset {source} could not be downloaded into {path}: {exc}") from None
        return path

    def _download(self, url: str, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with requests.get(url, stream=True, timeout=(CONNECT_TIMEOUT_SEC, self.read_timeout_sec)) as response:
            response.raise_for_status()
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
            try:
                with os.fdopen(fd, "wb") as out:
                    for chunk in response.iter_content(CHUNK_BYTES):
                        out.write(chunk)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
