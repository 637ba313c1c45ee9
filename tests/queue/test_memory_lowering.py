"""A guest that ran out of memory (the official image's exit 17, class `guest_memory`) is not retried blindly:
the queue runs one attempt fewer at once from then on, across restarts, and says so in QUEUE_STATUS.md."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.docker

OUT_OF_MEMORY = {"status": "error", "score": None, "failure_classification": "guest_memory"}


def peak_from(events: list[dict], since: float) -> int:
    """The most attempts running at one moment from `since` on (the stand-in's start/end lines)."""
    running = peak = 0
    for at, step in sorted((e["at"], 1 if e["event"] == "start" else -1) for e in events):
        running += step
        if at >= since:
            peak = max(peak, running)
    return peak


def test_a_guest_out_of_memory_lowers_how_many_attempts_run_at_once(make_panel, tmp_path):
    # t0 and t1 end only once t2 has started: three at once, however busy the machine
    third = str(tmp_path / "t2-started")
    panel = make_panel([f"t{i}" for i in range(6)], max_active_tasks=3, sleep_sec=(0.4, 0.6),
                       outcomes={"t0": [OUT_OF_MEMORY, {}]},
                       scenario={"signal_file": {"t2": third}, "wait_file": {"t0": third, "t1": third}})
    assert panel.run() == {f"t{i}": "finished" for i in range(6)}
    set_aside = [e for e in panel.queue_events() if e["event"] == "set_aside"]
    assert [(e["task_id"], e["classification"]) for e in set_aside] == [("t0", "guest_memory")]
    assert peak_from(panel.events(), 0.0) == 3, "the configured concurrency, until memory ran out"
    assert peak_from(panel.events(), set_aside[0]["at"]) <= 2, "one fewer from then on"
    lowered = "max_active_tasks lowered to 2: guests ran out of memory."
    status = (panel.run_dir / "QUEUE_STATUS.md").read_text()
    assert lowered in status and "## Active (0 of 2)" in status
    panel.run()  # a restarted queue derives the lower limit from retries/, as all else it decides
    assert lowered in (panel.run_dir / "QUEUE_STATUS.md").read_text()
