"""The screen right after each action, for the call log, as a reduced JPEG.

Taken before the action's result goes back (~0.15 s on a 1920x1080 screen): the agent CLI may end this server
the moment its turn is over (Codex kills it), and a shot taken later would then be lost.
"""

from __future__ import annotations

import base64
import io
import time

from PIL import Image

from . import screen, xinput
from .call_log import SIZE_CAP, CallLog, ShotRecord

MAX_WIDTH = 1280
"""Reduced: a 1920x1080 desktop is ~20-120 KB at this width and quality."""
JPEG_QUALITY = 60


def take_shot(call_log: CallLog, seq: int, *, pointer: bool, image_b64: str | None = None) -> None:
    """Record the screen after call `seq` (or `image_b64`, the screenshot the model was given); with `pointer`,
    also where the pointer is. A failed capture is recorded as such."""
    at = time.time()
    try:
        if image_b64 is None:
            full = screen.grab()
            screen_size = full.size
        else:
            full = Image.open(io.BytesIO(base64.b64decode(image_b64)))
            screen_size = xinput.display_size()
        where = xinput.cursor_position() if pointer else None
        reduced, _ = screen.downscale(full, MAX_WIDTH, None)
        name = call_log.write_shot(seq, screen.encode(reduced, "jpeg", JPEG_QUALITY))
    except Exception as exc:  # noqa: BLE001 - evidence never fails a call; the record says what happened
        failed = f"capture failed: {type(exc).__name__}: {exc}"[:300]
        call_log.write(ShotRecord(process=call_log.process, seq=seq, at=at, dropped=failed), drop_record=True)
        return
    call_log.write(ShotRecord(process=call_log.process, seq=seq, at=at, file=name, width=reduced.width,
                              height=reduced.height, screen_width=screen_size[0], screen_height=screen_size[1],
                              pointer=where, dropped=None if name else SIZE_CAP), drop_record=True)
