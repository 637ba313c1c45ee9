"""A guest's wait, shown in its attempt's progress.json, which QUEUE_STATUS.md reads (and a Ray node mirrors to
the head): while the guest waits for memory, the phase the runner wrote ("boot") reads "boot: waiting for
memory: ..."; once admitted, the runner's own record is put back as it was."""

from __future__ import annotations

from pathlib import Path

import orjson

from hcu.record_io import write_atomic, write_json


class WaitNote:
    """Called with why the guest waits, or None when it no longer does."""

    def __init__(self, progress_file: Path) -> None:
        self.path = progress_file
        self.saved: bytes | None = None
        self.noted = False

    def __call__(self, note: str | None) -> None:
        if note is None:
            self._restore()
            return
        if not self.noted:
            self.saved = self.path.read_bytes() if self.path.exists() else None
            self.noted = True
        progress = _parsed(self.saved)
        phase = str(progress.get("phase") or "boot")
        write_json(self.path, {**progress, "phase": f"{phase}: {note}"})

    def _restore(self) -> None:
        if not self.noted:
            return
        if self.saved is None:
            self.path.unlink(missing_ok=True)
        else:
            write_atomic(self.path, self.saved)
        self.noted = False


def _parsed(raw: bytes | None) -> dict:
    try:
        value = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
