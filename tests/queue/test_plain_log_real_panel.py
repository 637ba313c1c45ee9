"""The plain-line log of a real panel (the demo's stack: the real queue, run_task, agent CLI, gateway and
evaluator on the test desktop) whose output is not a terminal: one line per queue event, in the queue's order,
launches and finishes of both tasks among them, then the summary."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from hcu import REPO_ROOT
from hcu.demo.stand_in import free_port
from hcu.osworld.guest.bridge import bridge_address
from hcu.osworld.live.plain import event_line
from tests.demo_panel import demo_config

pytestmark = [pytest.mark.docker, pytest.mark.artifacts, pytest.mark.osworld, pytest.mark.timeout(1800)]

TASKS = [{"id": "e0df059f-28a6-4169-924f-b9623e7184cc", "task_domain": "os"},
         {"id": "b3d4a89c-53f2-4d6b-8b6a-541fb5d205fa", "task_domain": "os"}]


def test_a_real_panel_tells_its_story_one_line_per_event(tmp_path: Path) -> None:
    bridge = bridge_address()
    config = demo_config(tmp_path, "plain-log", tasks=TASKS, max_active_tasks=1, launch_stagger_seconds=0,
                         gateway=f"http://{bridge}:{free_port(bridge)}")
    body = orjson.loads(config.read_bytes())
    run_dir = Path(body["results_dir"]) / body["run_id"]
    demo = subprocess.run([sys.executable, "-m", "hcu.demo", "--config", str(config)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=1500)
    assert demo.returncode == 0, (demo.stdout + demo.stderr)[-3000:]
    events = [orjson.loads(line) for line in (run_dir / "logs" / "queue.jsonl").read_bytes().splitlines()]
    lines = demo.stdout.split("\n# ", 1)[0].splitlines()  # summary.md follows the queue's lines
    told = [line for line in lines if " summary: " not in line]
    assert told == [event_line(e) for e in events], demo.stdout[-3000:]
    story = [line.split(" ", 2)[1:] for line in told if line.split(" ", 2)[1] in ("launch", "finish")]
    first, second = (task["id"] for task in TASKS)
    order = [(word, rest.split(" ", 1)[0]) for word, rest in story]
    assert order in ([("launch", first), ("finish", first), ("launch", second), ("finish", second)],
                     [("launch", second), ("finish", second), ("launch", first), ("finish", first)]), told
    assert all(": finished, score " in " ".join(words) for words in story if words[0] == "finish")
    assert told[-1].endswith("done: every repeat final (2 finished)")
    assert " summary: 2 of 2 repeats final (2 finished); 0 running, 0 to start" in lines[-1]
