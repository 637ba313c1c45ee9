"""The plain-line log of a real panel (the demo: the real queue, run_task, agent CLI, gateway and evaluator on the
test desktop) whose output is not a terminal: one line per queue event, in the queue's order, a launch before the
finish of every task, then the summary. Read from the session's demo run (demo_panel.py), not a panel of its own."""

from __future__ import annotations

import orjson
import pytest

from hcu.osworld.live.plain import event_line
from tests.demo_panel import DemoRun

pytestmark = [pytest.mark.docker, pytest.mark.artifacts, pytest.mark.osworld, pytest.mark.timeout(1800)]


def test_a_real_panel_tells_its_story_one_line_per_event(demo_run: DemoRun) -> None:
    run_dir = demo_run.run_dir
    config = orjson.loads((run_dir / "config.json").read_bytes())
    tasks = [task["id"] for task in config["tasks"]]
    events = [orjson.loads(line) for line in (run_dir / "logs" / "queue.jsonl").read_bytes().splitlines()]
    lines = demo_run.stdout.split("\n# ", 1)[0].splitlines()  # summary.md follows the queue's lines
    told = [line for line in lines if " summary: " not in line]
    assert told == [event_line(e) for e in events], demo_run.stdout[-3000:]
    story = [line.split(" ", 2)[1:] for line in told if line.split(" ", 2)[1] in ("launch", "finish")]
    said = [(word, rest.split(" ", 1)[0]) for word, rest in story]
    for task in tasks:
        assert said.count(("launch", task)) == said.count(("finish", task)) == 1, told
        assert said.index(("launch", task)) < said.index(("finish", task)), told
    assert all(": finished, score " in " ".join(words) for words in story if words[0] == "finish")
    assert told[-1].endswith(f"done: every repeat final ({len(tasks)} finished)")
    assert f" summary: {len(tasks)} of {len(tasks)} repeats final ({len(tasks)} finished); 0 running, 0 to start" \
        in lines[-1]
