"""Run directories for the viewer's tests (built once per session from the project's record models), and the
served viewer as its own process."""

from __future__ import annotations

import contextlib
import select
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hcu import REPO_ROOT
from tests.view.sample_run import OUTCOMES, Attempt, Outcome, SampleRun, add_repeat_summary, build_run

TASKS = 16
REPEATS = 2
SERVE_START_TIMEOUT_SEC = 60


def task_id(index: int) -> str:
    return f"{index:08x}-5e1f-4a11-9c0d-{index:012x}"


def panel(outcome_of: Callable[[int, int], Outcome], steps_of: Callable[[int], int] = lambda i: 3 + i % 4,
          ) -> list[Attempt]:
    return [Attempt(task_id(i), outcome_of(i, r), repeat=r, steps=steps_of(i))
            for i in range(TASKS) for r in range(1, REPEATS + 1)]


@pytest.fixture(scope="session")
def sample(tmp_path_factory: pytest.TempPathFactory) -> SampleRun:
    """16 tasks x 2 repeats covering every outcome, salted with the run's secrets, with the repeat fields in its
    summary."""
    run = build_run(tmp_path_factory.mktemp("view-runs"), "view-a", panel(lambda i, r: OUTCOMES[(i + r) % 8]),
                    salted=True)
    add_repeat_summary(run, REPEATS)
    return run


@pytest.fixture(scope="session")
def other_sample(tmp_path_factory: pytest.TempPathFactory) -> SampleRun:
    """The same tasks, scored differently: a run to compare with."""
    return build_run(tmp_path_factory.mktemp("view-runs-b"), "view-b",
                     panel(lambda i, r: "pass" if i % 3 == 0 else "fail", steps_of=lambda i: 2 + i % 3))


@dataclass
class Served:
    url: str
    process: subprocess.Popen[str]


@contextlib.contextmanager
def serve(argv: list[str]) -> Iterator[Served]:
    """`python -m hcu.osworld.view ARGV --port 0` until the test ends; its URL from the line it prints."""
    process = subprocess.Popen([sys.executable, "-m", "hcu.osworld.view", *argv, "--port", "0"], cwd=REPO_ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([process.stdout], [], [], SERVE_START_TIMEOUT_SEC)
        assert ready, "the viewer printed no URL within a minute"
        line = process.stdout.readline()
        assert " at http://" in line, f"unexpected first line {line!r}: {process.stderr.read() if not line else ''}"
        yield Served(line.split(" at ", 1)[1].split()[0].rstrip("/"), process)
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture
def served(sample: SampleRun, other_sample: SampleRun) -> Iterator[Served]:
    with serve([str(sample.run_dir), "--compare", str(other_sample.run_dir)]) as running:
        yield running


def export_of(sample: SampleRun, other: SampleRun, out: Path) -> Path:
    done = subprocess.run([sys.executable, "-m", "hcu.osworld.view", str(sample.run_dir), "--compare",
                           str(other.run_dir), "--export", str(out)], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    return out
