"""Time as the queue reads it: launch pacing, pauses, the admission's windows and the events' times."""

from __future__ import annotations

import time


class QueueClock:
    """The system's clock; a test or a benchmark passes one that moves itself."""

    sleep = staticmethod(time.sleep)
    time = staticmethod(time.time)  # after `sleep`: from here on `time` in this class body is this method


SYSTEM_CLOCK = QueueClock()
