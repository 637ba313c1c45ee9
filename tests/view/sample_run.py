"""Run directories for the viewer's tests and benchmark, written with the project's own record models (the run
config, result.json, attempt.json, retry.json, setup step records, the ATIF trajectory) and real PNG/JPEG
screenshots (Pillow), summarized by the real `summarize`.

An attempt's outcome is one of OUTCOMES. Each run has the queue's events (logs/queue.jsonl: a start, a launch and
an exit per attempt, a set_aside per retry, two admission limits) and the gateway's token log (one row per model
call of each attempt, its rate-limit wait on the first), consistent with the results. A run may be salted: its key
file, the attempts' scope secrets and provider-looking keys are written into logs, events, meta.json and the
trajectory, so a test can check that no page or served file shows any of them.
"""

from __future__ import annotations

import dataclasses
import io
import os
import zlib
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Literal

import orjson
from PIL import Image, ImageDraw

from hcu.gateway.scope_secret import load_or_create_key, scope_secret
from hcu.osworld.evidence.atif import (
    Agent,
    FinalMetrics,
    Observation,
    ObservationResult,
    Pointer,
    ResultExtra,
    Step,
    StepMetrics,
    ToolCall,
    Trajectory,
    image_part,
    text_part,
)
from hcu.osworld.osworld_bridge.setup import SetupStepRecord
from hcu.osworld.queue.state import RetryNote
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.records.lease import AttemptLease
from hcu.osworld.records.result import EmptyGetter, PhaseTiming, TaskResult, Usage
from hcu.osworld.run_config import parse_config
from hcu.osworld.summary.model import parse_summary
from hcu.osworld.summary.run_summary import summarize
from hcu.record_io import write_json, write_record

Outcome = Literal["pass", "fail", "partial", "timeout", "evaluator_error", "retried_pass", "read_nothing",
                  "no_result"]
OUTCOMES: tuple[Outcome, ...] = ("pass", "fail", "partial", "timeout", "evaluator_error", "retried_pass",
                                 "read_nothing", "no_result")
SCREEN = (1280, 800)
"""The guest screen the pointer coordinates belong to; screenshots are written at half this size."""
PHASES = (("boot", 1.5), ("isolate", 0.1), ("upload", 1.2), ("setup", 6.0), ("probe", 3.0), ("agent", 60.0),
          ("settle", 2.0), ("evaluate", 4.0), ("collect", 0.1), ("cleanup", 0.5))
RECORDING_STUB = b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom" + bytes(4096)
DOMAINS = ("chrome", "gimp", "libreoffice_calc", "multi_apps", "os", "thunderbird", "vlc", "vs_code")
QUOTA_TPM = 20_000
"""The run config's tokens-per-minute quota for openai."""


@dataclass
class Attempt:
    task_id: str
    outcome: Outcome
    repeat: int = 1
    steps: int = 3

    @property
    def key(self) -> str:
        return self.task_id if self.repeat == 1 else f"{self.task_id}.r{self.repeat}"


@dataclass
class SampleRun:
    run_dir: Path
    attempts: list[Attempt]
    secrets: list[str] = field(default_factory=list)
    """Every secret value written into the run (empty unless salted)."""


def screenshot(step: int, pointer: tuple[int, int], fmt: str) -> bytes:
    """A screen at half the guest's size with a crosshair where the pointer landed, labelled with its step."""
    width, height = SCREEN[0] // 2, SCREEN[1] // 2
    image = Image.new("RGB", (width, height), (40 + 20 * (step % 8), 70, 120))
    draw = ImageDraw.Draw(image)
    x, y = pointer[0] // 2, pointer[1] // 2
    draw.line([(x - 12, y), (x + 12, y)], fill=(255, 255, 0), width=2)
    draw.line([(x, y - 12), (x, y + 12)], fill=(255, 255, 0), width=2)
    draw.text((10, 10), f"step {step}", fill=(255, 255, 255))
    out = io.BytesIO()
    image.save(out, format=fmt)
    return out.getvalue()


def pointer_of(step: int) -> tuple[int, int]:
    return 100 + 97 * step % (SCREEN[0] - 200), 80 + 61 * step % (SCREEN[1] - 160)


def trajectory(attempt: Attempt, folder: Path, salt: str | None, shared_jpeg: bytes | None) -> Trajectory:
    """An instruction step, then one agent step per action, each with its screenshot in steps/ (an image content
    part of the action's result)."""
    steps = [Step(step_id=1, source="user", message=f"Do task {attempt.task_id} in the desktop.")]
    (folder / "steps").mkdir(parents=True, exist_ok=True)
    for n in range(2, attempt.steps + 2):
        x, y = pointer_of(n)
        name = f"steps/step-{n:03d}." + ("png" if n % 2 else "jpg")
        data = shared_jpeg if shared_jpeg is not None else screenshot(n, (x, y), "PNG" if n % 2 else "JPEG")
        (folder / name).write_bytes(data)
        secret_line = f" (env OPENAI_API_KEY={salt})" if salt and n == 2 else ""
        steps.append(Step(
            step_id=n, source="agent", timestamp=f"2026-12-01T10:00:{n:02d}Z", model_name="gpt-5.5",
            message=f"Step {n}: clicking the button at ({x}, {y}).{secret_line}",
            reasoning_content=f"The target is at ({x}, {y}).",
            tool_calls=[ToolCall(tool_call_id=f"call-{n}", function_name="mcp__computer-use__click",
                                 arguments={"x": x, "y": y, "button": "left"})],
            observation=Observation(results=[ObservationResult(
                source_call_id=f"call-{n}", content=[text_part(f"clicked at ({x}, {y})"), image_part(name)],
                extra=ResultExtra(duration_sec=0.12,
                                  pointer=Pointer(x=x, y=y, screen_width=SCREEN[0], screen_height=SCREEN[1])))]),
            metrics=StepMetrics(prompt_tokens=1000 * n, completion_tokens=50 * n, cached_tokens=500 * n,
                                cost_usd=0.001 * n, extra={"latency_sec": 1.5 + n / 10,
                                                           "rate_limit_wait_sec": 3.0 if n == 3 else 0.0})))
    return Trajectory(session_id=f"session-{attempt.key}", agent=Agent(name="codex", version="0.99.0",
                                                                        model_name="gpt-5.5"),
                      steps=steps, final_metrics=FinalMetrics(total_steps=len(steps), total_cost_usd=None),
                      extra={"attempt_id": attempt.key})


def result_for(run_id: str, attempt: Attempt, number: int, domain: str, started: float) -> TaskResult:
    o = attempt.outcome
    ident = AttemptId(run_id=run_id, task_id=attempt.task_id, attempt=number)
    phases, at = [], started
    for name, typical in PHASES:
        seconds = 20.0 * attempt.steps if name == "agent" else typical
        failed = o == "evaluator_error" and name == "evaluate"
        phases.append(PhaseTiming(name=name, started_at=at, duration_sec=seconds, status="failed" if failed else "ok",
                                  error="EvaluatorError: metric raised" if failed else None))
        at += seconds
    score = {"pass": 1.0, "retried_pass": 1.0, "partial": 0.5}.get(o, 0.0)
    result = TaskResult(
        status="evaluator_error" if o == "evaluator_error" else "completed", attempt_id=str(ident), run_id=run_id,
        task_id=attempt.task_id, task_domain=domain, attempt=number, agent="codex", model="gpt-5.5",
        effort="xhigh", score=None if o == "evaluator_error" else score, evaluator_score=1.0 if o == "timeout" else
        (None if o == "evaluator_error" else score), termination_reason="timeout" if o == "timeout" else "completed",
        failure_classification="evaluator" if o == "evaluator_error" else None,
        failure_message="the evaluator raised: KeyError 'x'" if o == "evaluator_error" else None,
        getters_read_nothing=[EmptyGetter(getter="get_vm_file", reason="returned None")] if o == "read_nothing"
        else [], usage=Usage(model_calls=attempt.steps, requests=attempt.steps + 1, input_tokens=1000 * attempt.steps,
                             output_tokens=60 * attempt.steps, fully_accounted=True, rate_limit_wait_sec=3.0),
        settle_seconds=2.0, phases=phases, started_at=started, finished_at=at, duration_sec=at - started)
    if o == "timeout":
        result.score = 0.0
    return result


def _write_result(folder: Path, result: TaskResult, repeat: int, cost: float | None) -> None:
    body = result.model_dump(mode="json")
    body.update(repeat=repeat, cost_usd=cost)  # the repeats/cost contract: fields main's model does not name yet
    write_json(folder / "result.json", body)


def _meta(result: TaskResult, salt: str | None) -> dict:
    steps = [SetupStepRecord(index=0, type="launch", parameters={"command": ["google-chrome"]}, duration_sec=1.2,
                             ok=True).model_dump(mode="json"),
             SetupStepRecord(index=1, type="sleep", parameters={"seconds": 1}, duration_sec=1.0,
                             ok=True).model_dump(mode="json")]
    meta = {"schema_version": 1, "attempt_id": result.attempt_id, "task_sha256": "ab" * 32,
            "scope": result.attempt_id.replace("/", ".") if result.attempt_id else None, "setup_steps": steps,
            "guest": {"container_id": "c0ffee", "host": "172.17.0.1"}}
    if salt:
        meta["gateway_token"] = salt
    return meta


@dataclass(frozen=True)
class Ran:
    """When an attempt ran, for the queue's events and the token log."""

    attempt: Attempt
    number: int
    scope: str
    started: float
    finished: float | None
    """None: still running (no result)."""
    calls: int
    set_aside: bool = False


RAISED_AT = 600.0
"""Seconds after the first launch when the admission limit is raised: from the most attempts that ran at once by a
quarter."""
WAIT_SEC = 3.0
"""The rate-limit wait of each attempt's first model call (what result_for's usage says)."""
CALL = {"input_tokens": 1000, "cached_input_tokens": 0, "cache_write_input_tokens": 0, "output_tokens": 60,
        "reasoning_tokens": 0}
"""One model call's tokens (result_for's usage is `steps` of these)."""


def write_logs(run_dir: Path, ran: list[Ran]) -> None:
    """logs/queue.jsonl and gateway-tokens.jsonl of the attempts that ran."""
    first = min(r.started for r in ran)
    events = [{"at": first - 5.0, "event": "start", "pid": 1, "executor": "local"}]
    rows = []
    for r in ran:
        which = {"task_id": r.attempt.task_id, "repeat": r.attempt.repeat, "attempt": r.number}
        events.append({"at": r.started, "event": "launch", **which, "pid": 1, "node": None})
        end = r.finished if r.finished is not None else r.started + 30.0 * (r.calls + 1)
        if r.finished is not None:
            events.append({"at": r.finished, "event": "exit", **which, "state": "finished", "node": None,
                           "score": None})
        if r.set_aside:
            events.append({"at": r.finished, "event": "set_aside", **which, "classification": "guest", "node": None})
        for n in range(r.calls):
            rows.append({"time": r.started + (end - r.started) * (n + 1) / (r.calls + 1), "task": r.scope,
                         "provider": "openai", "model": "gpt-5.5", "path": "/v1/responses", "status": 200,
                         "outcome": "success", "counted": True, "calls_used": n + 1, "usage": CALL,
                         "latency_sec": 1.5 + (WAIT_SEC if n == 0 else 0.0),
                         "rate_limit_wait_sec": WAIT_SEC if n == 0 else 0.0})
    events.sort(key=lambda e: e["at"])
    peak = max(accumulate({"launch": 1, "exit": -1}.get(e["event"], 0) for e in events))
    events[1:1] = [{"at": first - 5.0, "event": "limit", "limit": peak, "signal": "max_active_tasks"}]
    events.append({"at": first + RAISED_AT, "event": "limit", "limit": peak + max(1, peak // 4), "signal": "ctl set"})
    events.sort(key=lambda e: e["at"])
    (run_dir / "logs").mkdir(exist_ok=True)
    (run_dir / "logs" / "queue.jsonl").write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    rows.sort(key=lambda row: row["time"])
    (run_dir / "gateway-tokens.jsonl").write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))


def write_attempt(run_id: str, run_dir: Path, attempt: Attempt, number: int, folder: Path, domain: str,
                  salt: str | None, shared_jpeg: bytes | None, log: Path) -> Ran:
    """The attempt's folder; when it ran."""
    folder.mkdir(parents=True, exist_ok=True)
    scope = f"{run_id}.{attempt.key}.a{number}"
    started = 1_780_000_000.0 + 100 * number + zlib.crc32(attempt.key.encode()) % 1000
    write_record(folder / "attempt.json", AttemptLease(
        attempt_id=f"{run_id}/{attempt.task_id}/{number}", run_id=run_id, task_id=attempt.task_id, attempt=number,
        pid=12345, host="viewer-test", started_at=started, result_dir=str(folder)))
    secret_note = f"Authorization: Bearer {salt}\n" if salt else ""
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"[{attempt.key}] phase boot: start\n{secret_note}[{attempt.key}] phase agent: ok\n")
    if attempt.outcome == "no_result":
        write_json(folder / "progress.json", {"phase": "agent", "since": started})
        return Ran(attempt, number, scope, started, None, attempt.steps)
    result = result_for(run_id, attempt, number, domain, started)
    if salt and result.failure_message:
        result.failure_message += f" (the CLI printed OPENAI_API_KEY={salt})"
    _write_result(folder, result, attempt.repeat, None if attempt.steps % 4 == 0 else round(0.01 * attempt.steps, 4))
    write_json(folder / "meta.json", _meta(result, salt))
    write_record(folder / "trajectory.json", trajectory(attempt, folder, salt, shared_jpeg))
    events = [{"turn": 1, "kind": "message", "text": "working"},
              {"turn": 1, "kind": "tool_call", "name": "click", "arguments": {"x": 1, "y": 2}, "result": "ok"}]
    if salt:
        events.append({"turn": 1, "kind": "output", "text": f"TOKEN={salt}"})
    (folder / "agent.jsonl").write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    (folder / "phase-agent-turn-1-events.jsonl").write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    (folder / "phase-agent-turn-1-stderr.log").write_text(secret_note + "done\n")
    if attempt.outcome == "pass":  # a container header only: what is checked is how it is offered and served
        (folder / "recording.mp4").write_bytes(RECORDING_STUB)
    if shared_jpeg is None:
        for name in ("final-before-eval.png", "final-after-eval.png"):
            (folder / name).write_bytes(screenshot(99, (640, 400), "PNG"))
    return Ran(attempt, number, scope, started, result.finished_at, attempt.steps)


def write_retry(run_id: str, run_dir: Path, attempt: Attempt, domain: str, salt: str | None,
                shared_jpeg: bytes | None) -> Ran:
    folder = run_dir / "retries" / f"{attempt.key}-1"
    ran = write_attempt(run_id, run_dir, Attempt(attempt.task_id, "fail", attempt.repeat, steps=1), 1, folder,
                        domain, salt, shared_jpeg, folder / "runner.log")
    body = orjson.loads((folder / "result.json").read_bytes())
    body.update(status="error", score=None, evaluator_score=None, failure_classification="guest",
                failure_message="the guest died")
    write_json(folder / "result.json", body)
    write_record(folder / "retry.json", RetryNote(task_id=attempt.task_id, attempt=1, failure_classification="guest",
                                                  reason="the guest died", moved_at=1_780_000_500.0))
    return dataclasses.replace(ran, set_aside=True)


def build_run(root: Path, run_id: str, attempts: list[Attempt], *, salted: bool = False,
              light_screens: bool = False, domains: dict[str, str] | None = None) -> SampleRun:
    """A run directory under `root` holding `attempts` (their tasks make the config, in order of appearance).
    `light_screens` writes one small JPEG for every step (benchmarks: thousands of attempts)."""
    task_ids = list(dict.fromkeys(a.task_id for a in attempts))
    domain = domains or {t: DOMAINS[i % len(DOMAINS)] for i, t in enumerate(task_ids)}
    config = parse_config({"run_id": run_id, "benchmark_version": "v1", "agent": "codex", "test_desktop": True,
                           "gateway": "http://127.0.0.1:9", "results_dir": str(root),
                           "tasks": [{"id": t, "task_domain": domain[t]} for t in task_ids],
                           "repeats": max(a.repeat for a in attempts), "quota": {"openai": {"tpm": QUOTA_TPM}}},
                          root / f"{run_id}.json")
    run_dir = config.run_dir
    (run_dir / "tasks").mkdir(parents=True)
    write_json(run_dir / "config.json", config.model_dump(mode="json"))
    sample = SampleRun(run_dir, attempts)
    key = load_or_create_key(run_dir / "gateway-scope.key") if salted else None
    if key is not None:
        sample.secrets.append(key.hex())
    shared = screenshot(1, (100, 100), "JPEG") if light_screens else None
    ran = []
    for attempt in attempts:
        number = 2 if attempt.outcome == "retried_pass" else 1
        scope = AttemptId(run_id=run_id, task_id=attempt.task_id, attempt=number).gateway_scope
        salt = scope_secret(key, scope) if key is not None else None
        if salt:
            sample.secrets.append(salt)
        if attempt.outcome == "retried_pass":
            ran.append(write_retry(run_id, run_dir, attempt, domain[attempt.task_id], salt, shared))
        ran.append(write_attempt(run_id, run_dir, attempt, number, run_dir / "tasks" / attempt.key,
                                 domain[attempt.task_id], salt, shared, run_dir / "logs" / f"{attempt.key}.log"))
    write_logs(run_dir, ran)
    summarize(run_dir)
    return sample


def add_repeat_summary(sample: SampleRun, k: int) -> None:
    """summary.json's repeat fields with every task's pass@k and pass^k known (as if every repeat were scored:
    summarize itself withholds them here), and a known cost; written through the summary's model."""
    path = sample.run_dir / "summary" / "summary.json"
    summary, _ = parse_summary(orjson.loads(path.read_bytes()))
    per_task = []
    for row in summary.per_task:
        scores = [1.0 if a.outcome in ("pass", "retried_pass") else 0.5 if a.outcome == "partial" else 0.0
                  for a in sample.attempts
                  if a.task_id == row.task_id and a.outcome not in ("evaluator_error", "no_result")]
        successes = sum(1 for s in scores if s == 1.0)
        per_task.append(row.model_copy(update={"pass_at_k": float(successes > 0),
                                               "pass_hat_k": float(successes == len(scores) > 0)}))
    summary = summary.model_copy(update={
        "repeats": k, "per_task": per_task, "pass_at_k": sum(r.pass_at_k for r in per_task) / len(per_task),
        "pass_hat_k": sum(r.pass_hat_k for r in per_task) / len(per_task), "run_to_run_sd": 0.021,
        "task_list_sd": 0.034, "cost_usd": 1.25, "cost_per_valid_result_usd": 0.05})
    write_json(path, summary.to_json())


def file_list(folder: Path) -> list[Path]:
    return [Path(root) / name for root, _, names in os.walk(folder) for name in names]
