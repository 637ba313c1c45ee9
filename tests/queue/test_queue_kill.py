"""kill -9 of the queue at random points, 20 times, on a panel of two repeats per task, then a resume to the end:
nothing lost or doubled, no repeat's attempt taken for another's."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import orjson
import pytest

from hcu.osworld.queue.state import runs_attempt
from hcu.osworld.records.identity import repeat_key

pytestmark = pytest.mark.docker

ROUNDS = 20
TASKS = [f"k{i}" for i in range(5)]
REPEATS = 2
KEYS = [repeat_key(task, repeat) for task in TASKS for repeat in range(1, REPEATS + 1)]
KILL_RUNNER_ROUNDS = (1, 3, 6)
"""Rounds that also SIGKILL one runner, early while work remains, to make interrupted attempts."""


def final_results(run_dir: Path) -> dict[Path, tuple[bytes, int]]:
    """Results the queue must never touch again: clean outcomes in tasks/."""
    found = {}
    for path in run_dir.glob("tasks/*/result.json"):
        if orjson.loads(path.read_bytes()).get("failure_classification") is None:
            found[path] = (path.read_bytes(), path.stat().st_mtime_ns)
    return found


def live_leases(run_dir: Path) -> list[dict]:
    """Leases of live runners whose task still has retries to spare."""
    leases = [orjson.loads(p.read_bytes()) for p in run_dir.glob("tasks/*/attempt.json")]
    return [lease for lease in leases if lease["attempt"] <= 2
            and runs_attempt(lease["pid"], Path(lease["result_dir"]))]


def kill_one_runner(run_dir: Path, rng: random.Random) -> tuple[str, int, float] | None:
    """(the repeat's key, attempt, when) of the runner killed."""
    """SIGKILL a live runner (waiting up to 10 s for one); None when none was interrupted."""
    deadline = time.time() + 10
    while not (live := live_leases(run_dir)) and time.time() < deadline:
        time.sleep(0.05)
    if not live:
        return None
    lease = rng.choice(live)
    os.kill(lease["pid"], signal.SIGKILL)
    killed_at = time.time()
    while runs_attempt(lease["pid"], Path(lease["result_dir"])):
        time.sleep(0.01)
    if (Path(lease["result_dir"]) / "result.json").exists():
        return None  # it finished just before the signal: a result, not an interruption
    return repeat_key(lease["task_id"], lease["repeat"]), lease["attempt"], killed_at


def attempt_intervals(events: list[dict], kills: dict[tuple[str, int], float]) -> dict[tuple, list[float]]:
    """(repeat key, attempt) -> [start, end] from the stand-in's events."""
    spans: dict[tuple, list[float]] = {}
    for event in events:
        key = (repeat_key(event["task_id"], event["repeat"]), event["attempt"])
        assert not (event["event"] == "start" and key in spans), f"attempt {key} started twice"
        spans.setdefault(key, [event["at"], kills.get(key, float("inf"))])
        if event["event"] == "end":
            spans[key][1] = event["at"]
    return spans


def test_kill_9_at_random_points_then_resume(make_panel, sleep_image, containers_of):
    seed = time.time_ns()
    rng = random.Random(seed)
    guest_fail = {"status": "error", "score": None, "failure_classification": "guest"}
    probe_fail = {"status": "error", "score": None, "failure_classification": "probe"}
    panel = make_panel(TASKS, image=sleep_image, max_active_tasks=3, sleep_sec=(0.5, 1.5), repeats=REPEATS,
                       outcomes={"k2": [guest_fail, {}], "k4.r2": [probe_fail, probe_fail, {}]})
    run_dir, kills, kept = panel.run_dir, {}, {}
    for round_ in range(ROUNDS):
        queue = panel.start()
        time.sleep(rng.uniform(0.2, 2.2))
        if round_ in KILL_RUNNER_ROUNDS and (killed := kill_one_runner(run_dir, rng)):
            kills[killed[:2]] = killed[2]
        queue.kill()
        queue.wait(timeout=20)
        now = final_results(run_dir)
        for path, before in kept.items():
            assert now.get(path) == before, f"seed {seed}: finished result {path} changed in round {round_}"
        kept = now
    queue = panel.start()
    assert queue.wait(timeout=120) == 0, queue.stderr.read().decode()

    assert kills, f"seed {seed}: no runner was interrupted; the test did not exercise retries"
    for key in KEYS:
        result = orjson.loads((run_dir / "tasks" / key / "result.json").read_bytes())
        assert result["status"] == "completed" and result["failure_classification"] is None, key
        assert repeat_key(result["task_id"], result["repeat"]) == key and result["attempt_id"].endswith(
            f"/{key}/{result['attempt']}")
    assert all(now_bytes == kept[path] for path, now_bytes in final_results(run_dir).items() if path in kept)
    for key, attempt in kills:
        note = orjson.loads((run_dir / "retries" / f"{key}-{attempt}" / "retry.json").read_bytes())
        assert note["failure_classification"] == "interrupted", (seed, key, attempt)
        assert repeat_key(note["task_id"], note["repeat"]) == key
    for key, attempts in (("k2", [1]), ("k4.r2", [1, 2])):
        for attempt in attempts:
            note = orjson.loads((run_dir / "retries" / f"{key}-{attempt}" / "retry.json").read_bytes())
            assert note["failure_classification"] in ("guest", "probe", "interrupted")

    spans = attempt_intervals(panel.events(), kills)
    retried = {path.name for path in (run_dir / "retries").iterdir()}
    for key, attempt in spans:
        final = orjson.loads((run_dir / "tasks" / key / "result.json").read_bytes())["attempt"]
        assert attempt == final or f"{key}-{attempt}" in retried, f"seed {seed}: {key}/{attempt} lost"
    for key in KEYS:
        mine = sorted(span for (k, _), span in spans.items() if k == key)
        overlap = any(a[1] > b[0] for a, b in zip(mine, mine[1:], strict=False))
        assert not overlap, f"seed {seed}: two attempts of {key} ran at once"
    marks = sorted([(s, 1) for s, _ in spans.values()] + [(e, -1) for _, e in spans.values()])
    running = [sum(step for _, step in marks[: i + 1]) for i in range(len(marks))]
    assert max(running) <= 3, f"seed {seed}: more than max_active_tasks attempts ran at once"
    assert containers_of(panel.config.run_id) == [], f"seed {seed}: containers left"
