"""A pilot run directory whose figures are known: hand-written result.json files and token-log rows.

Five attempts of tasks p1..p5 (domain os), attempt k (1..5) made 10k counted calls, each row 10,000 input tokens
(6,000 of them cached) and 200 output tokens, so attempt k used 102,000k tokens; their agent phases and
durations are AGENT_SEC and DURATION_SEC, and p3 waited 300 s for rate limits. A sixth attempt, set aside
under retries/ (p1's first), never reached the agent phase. The token log also holds a row of another run (a
shared gateway) and, when asked, a torn line.

Throttled (`throttled=True`), the same attempts waited for its quota: the gateway's waits THROTTLED_WAIT_SEC, half on
each of an attempt's first two rows, and p5's turn ended once on a rate limit, its session resumed after the run's
`rate_limit_resume_delay` of RESUME_DELAY_SEC; p2's first attempt, set aside under retries/ (p2-1), ended
`upstream_rate_limit` after 400 s in its agent phase and five rows.

Spread over minutes (`spread=True`), each attempt's n-th row ends in minute n of the pilot (from MINUTE_ZERO), so
rows of the same number share a minute; else all end within a minute.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from hcu.gateway.tokenlog import TORN_LINE_END, TokenLogRow, TokenUsage
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.records.result import PhaseTiming, TaskResult

RUN_ID = "pilot"
MODEL = "gpt-5.5"
AGENT_SEC = [600.0, 1200.0, 900.0, 1200.0, 1500.0]
DURATION_SEC = [700.0, 1300.0, 1000.0, 1300.0, 1600.0]
RATE_LIMIT_WAIT_SEC = [0.0, 0.0, 300.0, 0.0, 0.0]
THROTTLED_WAIT_SEC = [100.0, 300.0, 300.0, 300.0, 400.0]
RESUME_DELAY_SEC = 100.0
MINUTE_ZERO = 1_700_000_040.0
"""A minute's first second (28,333,334 x 60)."""
PRICES = {MODEL: {"input_usd_per_mtok": 1.25, "cached_input_usd_per_mtok": 0.125, "output_usd_per_mtok": 10.0}}
ROW_COST = (4_000 * 1.25 + 6_000 * 0.125 + 200 * 10.0) / 1e6
"""One row at PRICES: 4,000 uncached input, 6,000 cached, 200 output."""


def row(scope: str, number: int, wait: float = 0.0, model: str = MODEL, spread: bool = False) -> bytes:
    end = MINUTE_ZERO + (60 * (number - 1) + 30 if spread else number)
    return TokenLogRow(time=end, task=scope, provider="openai", upstream="r1.example", model=model,
                       path="/v1/responses", status=200, outcome="success", counted=True,
                       calls_used=number, usage=TokenUsage(input_tokens=10_000, cached_input_tokens=6_000,
                                                           output_tokens=200),
                       latency_sec=1.0, rate_limit_wait_sec=wait, attempts=1).model_dump_json().encode() + b"\n"


def result(task_id: str, attempt: int, phases: list[PhaseTiming], duration: float, **outcome: object) -> bytes:
    attempt_id = AttemptId(run_id=RUN_ID, task_id=task_id, attempt=attempt)
    return TaskResult(**{"status": "completed", "score": 1.0, **outcome}, attempt_id=str(attempt_id), run_id=RUN_ID,
                      task_id=task_id, task_domain="os", attempt=attempt, agent="codex", model=MODEL, phases=phases,
                      duration_sec=duration).model_dump_json().encode()


def phases(agent_sec: float) -> list[PhaseTiming]:
    return [PhaseTiming(name="boot", started_at=0.0, duration_sec=50.0),
            PhaseTiming(name="agent", started_at=50.0, duration_sec=agent_sec)]


def build_pilot(run_dir: Path, *, agent: str = "codex", model: str = MODEL, torn: bool = False,
                throttled: bool = False, spread: bool = False) -> Path:
    """The pilot run directory described above."""
    tasks = [f"p{k}" for k in range(1, 6)]
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_bytes(orjson.dumps({
        "run_id": RUN_ID, "benchmark_version": "v1", "agent": agent, "model": model, "effort": "xhigh",
        "tasks": [{"id": task, "task_domain": "os"} for task in tasks], "test_desktop": "hcu-test-desktop:latest",
        "rate_limit_resume_delay": RESUME_DELAY_SEC}))
    log = bytearray()
    waits = [[wait / 2, wait / 2] for wait in THROTTLED_WAIT_SEC] if throttled else [[w] for w in RATE_LIMIT_WAIT_SEC]
    for k, task in enumerate(tasks, start=1):
        attempt = 2 if task == "p1" or (throttled and task == "p2") else 1  # first attempts set aside
        scope = AttemptId(run_id=RUN_ID, task_id=task, attempt=attempt).gateway_scope
        for number in range(1, 10 * k + 1):
            log += row(scope, number, waits[k - 1][number - 1] if number <= len(waits[k - 1]) else 0.0, spread=spread)
        if torn and k == 2:
            log += b'{"time": 1700000000.5, "task": "pilot.p2.a1", "provi' + TORN_LINE_END
        (run_dir / "tasks" / task).mkdir(parents=True)
        (run_dir / "tasks" / task / "result.json").write_bytes(result(
            task, attempt, phases(AGENT_SEC[k - 1]), DURATION_SEC[k - 1],
            rate_limit_resumes=int(throttled and task == "p5")))
    log += row("another-run.p1.a1", 1, 60.0, spread=spread)  # a gateway the pilot shared with another run
    if throttled:
        cut = run_dir / "retries" / "p2-1"
        cut.mkdir(parents=True)
        (cut / "result.json").write_bytes(result("p2", 1, phases(400.0), 500.0, status="error", score=None,
                                                 failure_classification="upstream_rate_limit", rate_limit_resumes=2))
        log += b"".join(row("pilot.p2.a1", number, 60.0, spread=spread) for number in range(1, 6))
    (run_dir / "gateway-tokens.jsonl").write_bytes(bytes(log))
    retried = run_dir / "retries" / "p1-1"
    retried.mkdir(parents=True)  # never reached the agent phase: says nothing about usage
    failed = [PhaseTiming(name="boot", started_at=0.0, duration_sec=300.0, status="failed")]
    (retried / "result.json").write_bytes(result("p1", 1, failed, 300.0, status="error", score=None,
                                                 failure_classification="guest"))
    return run_dir
