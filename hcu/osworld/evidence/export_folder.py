"""The folder an export writes: claimed only when it is new, empty or an earlier export of the same kind, and filled
with files that carry the permissions of the attempt they come from.

An export marks its folder (`.hcu-export`, naming its format) before writing anything, so a later export of the
same format replaces it whole (no file of the earlier one is left behind), and any other folder is refused.
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path
from typing import Literal

import orjson
from PIL import Image

from hcu.osworld.errors import HcuOSWorldError
from hcu.record_io import write_atomic, write_atomic_chunks

ExportFormat = Literal["osworld", "harbor"]
MARKER = ".hcu-export"
EARLIER_OSWORLD_INDEX = "hcu-export.json"
"""What an osworld export of hcu before the marker left: its index (it still writes one)."""
COPY_CHUNK = 1 << 20


class ExportRefused(HcuOSWorldError):
    """The out folder cannot take this export; one line naming it."""


def claim_out_dir(out: Path, kind: ExportFormat, run_dir: Path) -> None:
    """Make `out` this export's own: create it, or empty an earlier export of `kind` there; refuse anything else."""
    resolved, run = out.resolve(), run_dir.resolve()
    if resolved.is_relative_to(run) or run.is_relative_to(resolved):
        raise ExportRefused(f"out: {out} overlaps the run directory {run_dir}; choose a folder outside it")
    if out.exists():
        if not out.is_dir():
            raise ExportRefused(f"out: {out} is a file, not a folder")
        if any(out.iterdir()):
            earlier = _earlier_kind(out)
            if earlier != kind:
                what = f"an export in the {earlier} format" if earlier else "not an earlier hcu export"
                raise ExportRefused(f"out: {out} holds files and is {what}; expected a new or empty folder or an "
                                    f"earlier {kind} export")
            for entry in out.iterdir():
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / MARKER, orjson.dumps({"format": kind, "run_dir": str(run)}))


def _earlier_kind(out: Path) -> str | None:
    try:
        marker = orjson.loads((out / MARKER).read_bytes())
    except FileNotFoundError:
        return "osworld" if (out / EARLIER_OSWORLD_INDEX).is_file() else None
    except orjson.JSONDecodeError:
        return None
    return marker.get("format") if isinstance(marker, dict) and isinstance(marker.get("format"), str) else None


class FileWriter:
    """Files of one exported attempt under `dest`, written atomically with the attempt's permissions (`mode`:
    its result.json's; None leaves the process default)."""

    def __init__(self, dest: Path, mode: int | None) -> None:
        self.dest, self.mode = dest, mode

    def bytes(self, name: str, data: bytes) -> str:
        write_atomic(self.dest / name, data)
        return self._with_mode(name)

    def png(self, name: str, image_file: Path) -> str:
        out = io.BytesIO()
        with Image.open(image_file) as image:
            image.save(out, format="PNG", compress_level=1)
        return self.bytes(name, out.getvalue())

    def copy(self, name: str, source: Path) -> str:
        with source.open("rb") as f:
            write_atomic_chunks(self.dest / name, iter(lambda: f.read(COPY_CHUNK), b""))
        return self._with_mode(name)

    def _with_mode(self, name: str) -> str:
        if self.mode is not None:
            os.chmod(self.dest / name, self.mode)
        return name
