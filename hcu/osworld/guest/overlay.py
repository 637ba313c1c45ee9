"""Per-attempt qcow2 overlays over a read-only guest image, findable by labels after a crash.

Before an overlay file is created, a registry entry (`<state dir>/overlays/<owner>.json`: overlay path and
labels) is written, so a runner `kill -9`ed at any point leaves nothing `cleanup` cannot find.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import orjson
from pydantic import BaseModel

from hcu.osworld.errors import ConfigurationError
from hcu.osworld.guest.state_dir import state_dir

QEMU_IMG_TIMEOUT_SEC = 60.0
GIB = 1 << 30


class OverlayEntry(BaseModel):
    overlay: Path
    labels: dict[str, str]
    below: Path | None = None
    """The overlay's own link to the image under it (a saved disk), removed with it."""


class ImageInfo(BaseModel):
    format: str
    virtual_size: int
    """Bytes."""


def _registry() -> Path:
    path = state_dir() / "overlays"
    path.mkdir(exist_ok=True)
    return path


def _qemu_img(*args: str) -> str:
    try:
        done = subprocess.run(
            ["qemu-img", *args], capture_output=True, text=True, timeout=QEMU_IMG_TIMEOUT_SEC, check=False
        )
    except FileNotFoundError:
        raise ConfigurationError("qemu-img not found: install the Debian package qemu-utils") from None
    if done.returncode != 0:
        raise RuntimeError(f"qemu-img {args[0]} failed: {done.stderr.strip()}")
    return done.stdout


def image_info(image: Path) -> ImageInfo:
    """Format and virtual size of a disk image (`-U`: readable while running guests use it)."""
    info = orjson.loads(_qemu_img("info", "-U", "--output", "json", str(image)))
    return ImageInfo(format=info["format"], virtual_size=info["virtual-size"])


def backing_chain(image: Path) -> list[Path]:
    """The images under `image`, nearest first (empty for an image without a backing file)."""
    chain = orjson.loads(_qemu_img("info", "-U", "--backing-chain", "--output", "json", str(image)))
    return [Path(layer["full-backing-filename"]) for layer in chain if layer.get("full-backing-filename")]


def check_image(image: Path, volume_size_gb: int) -> ImageInfo:
    """Refuse (a ConfigurationError) an image that is not a qcow2 file, or a volume larger than the image's
    virtual size."""
    if not image.is_file():
        raise ConfigurationError(f"guest image {image}: no such file")
    try:
        info = image_info(image)
    except RuntimeError as exc:
        raise ConfigurationError(f"guest image {image}: unreadable ({exc})") from None
    if info.format != "qcow2":
        raise ConfigurationError(f"guest image {image}: format is {info.format}, expected qcow2")
    if volume_size_gb * GIB > info.virtual_size:
        raise ConfigurationError(
            f"volume_size {volume_size_gb} GiB exceeds the virtual size of {image} "
            f"({info.virtual_size / GIB:g} GiB); use a volume_size of at most that or a larger image"
        )
    return info


def create_overlay(image: Path, overlay: Path, owner: str, labels: dict[str, str], *, own_link: bool = False) -> Path:
    """Register, then create, a qcow2 overlay backed by `image` (absolute path, so a container that mounts
    the image at the same path can open the chain). With `own_link`, the overlay stands on a link of its own to
    `image` (a saved disk that its cache may replace meanwhile), made beside it: the guest never depends on the
    cache's file staying."""
    overlay = overlay.resolve()
    below = overlay.with_name(f"{overlay.stem}.below.qcow2") if own_link else None
    entry = OverlayEntry(overlay=overlay, labels=labels, below=below)
    (_registry() / f"{owner}.json").write_bytes(orjson.dumps(entry.model_dump(mode="json")))
    overlay.parent.mkdir(parents=True, exist_ok=True)
    if below is not None:
        link_or_copy(image, below)
    _qemu_img("create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str((below or image).resolve()), str(overlay))
    return overlay


def link_or_copy(source: Path, target: Path) -> None:
    """`target` names `source`'s content: a hard link (nothing copied; the content lives while either name does),
    or a copy where the two are on different filesystems."""
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def remove_overlay(owner: str) -> Path | None:
    """Delete the owner's overlay file and registry entry; returns the overlay path if there was one."""
    record = _registry() / f"{owner}.json"
    if not record.exists():
        return None
    entry = OverlayEntry.model_validate_json(record.read_bytes())
    entry.overlay.unlink(missing_ok=True)
    if entry.below is not None:
        entry.below.unlink(missing_ok=True)
    record.unlink(missing_ok=True)
    return entry.overlay


def remove_matching(labels: dict[str, str]) -> list[Path]:
    """Remove every registered overlay whose labels include all of `labels`."""
    removed = []
    for record in sorted(_registry().glob("*.json")):
        entry = OverlayEntry.model_validate_json(record.read_bytes())
        if labels.items() <= entry.labels.items():
            removed.append(remove_overlay(record.stem))
    return [path for path in removed if path is not None]
