"""An hcu run in OSWorld's result layout, for OSWorld's own readers (show_result.py, its monitor, the
OSWorld-Verified archive): `<out>/<action space>/<observation type>/<model>/<domain>/<task id>/` holding

- `result.txt`: the score that counts (0 for a task the budget or the timeout ended), as OSWorld writes it;
  a withheld task (no usable score) has none, and says why in `withheld.txt` and in a last `{"Error": ...}` line
  of `traj.jsonl` (as OSWorld's runner ends an attempt that raised): never a 0;
- `traj.jsonl`: one line per tool call with OSWorld's fields (`step_num` is the agent step, shared by the calls
  of one generation), then the final answer as `DONE` (or `FAIL` for TASK_INFEASIBLE);
- `step_<n>_<timestamp>.png`: the screen after each call (the trajectory's screenshots); a call that took none
  names the last screen seen before it;
- `recording.mp4` when the attempt was recorded.

Repeat n >= 2 of a task goes under the model folder `<model>.r<n>`, so each repeat reads as one OSWorld run.
Files carry the permissions of the attempt's result.json.
"""

from __future__ import annotations

import io
import os
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from PIL import Image

from hcu.osworld.evidence.atif import Step, Trajectory
from hcu.osworld.evidence.cli_trace import computer_use_tool
from hcu.osworld.evidence.recording import RECORDING_NAME
from hcu.osworld.evidence.redact import Redactor
from hcu.osworld.records.layout import RESULT_FILE, TRAJECTORY_FILE
from hcu.osworld.records.result import TaskResult, result_if_readable
from hcu.osworld.summary.rows import counted_score
from hcu.record_io import write_atomic, write_atomic_chunks

TIMESTAMP = "%Y%m%d@%H%M%S%f"
"""OSWorld's action_timestamp (its runner's format)."""
INFO_TEXT_LIMIT = 2000
COPY_CHUNK = 1 << 20


@dataclass
class ExportedTask:
    domain: str
    task_id: str
    repeat: int
    folder: str
    score: float | None
    withheld: str | None
    steps: int
    cost_usd: float | None


def export_run(run_dir: Path, out: Path, *, action_space: str, observation_type: str,
               model: str | None = None) -> list[ExportedTask]:
    redactor = Redactor()
    exported = []
    for task_dir in sorted(p for p in (run_dir / "tasks").iterdir() if p.is_dir()):
        raw = _raw_result(task_dir)
        result = result_if_readable(task_dir / RESULT_FILE)
        repeat = int(raw.get("repeat") or _repeat_of(task_dir.name))
        name = model or (result.model if result else None) or "unknown-model"
        folder = out / action_space / observation_type / (name if repeat == 1 else f"{name}.r{repeat}")
        exported.append(export_task(task_dir, result, raw, folder, repeat, redactor))
    write_atomic(out / "hcu-export.json", orjson.dumps([asdict(t) for t in exported], option=orjson.OPT_INDENT_2))
    return exported


def export_task(task_dir: Path, result: TaskResult | None, raw: dict, model_dir: Path, repeat: int,
                redactor: Redactor) -> ExportedTask:
    task_id = (result.task_id if result else None) or task_dir.name.split(".r")[0]
    domain = (result.task_domain if result else None) or "unknown"
    dest = model_dir / domain / task_id
    mode = (task_dir / RESULT_FILE).stat().st_mode & 0o777 if result else None
    writer = _Writer(dest, mode)
    score, withheld = counted_score(result) if result else (None, "no readable result.json")
    if score is None and result is not None and result.failure_classification:
        withheld = f"{result.status}: {result.failure_classification}"
    trajectory = _trajectory(task_dir)
    lines = traj_lines(trajectory, task_dir, writer, final_action(result)) if trajectory else []
    if score is None:
        lines.append({"Error": f"withheld: {withheld}"})
        writer.bytes("withheld.txt", f"{withheld}\n".encode())
    else:
        writer.bytes("result.txt", f"{score}\n".encode())
    writer.bytes("traj.jsonl", b"".join(orjson.dumps(redactor.value(line)) + b"\n" for line in lines))
    if (task_dir / RECORDING_NAME).is_file():
        writer.copy(RECORDING_NAME, task_dir / RECORDING_NAME)
    cost = raw.get("cost_usd") if "cost_usd" in raw else (
        trajectory.final_metrics.total_cost_usd if trajectory and trajectory.final_metrics else None)
    return ExportedTask(domain, task_id, repeat, str(dest), score, None if score is not None else withheld,
                        sum(1 for line in lines if "step_num" in line), cost)


def final_action(result: TaskResult | None) -> str:
    """OSWorld's last action for how the agent ended: FAIL when it declared the task infeasible."""
    return "FAIL" if result is not None and result.protocol_word == "TASK_INFEASIBLE" else "DONE"


def traj_lines(trajectory: Trajectory, task_dir: Path, writer: _Writer, last_action: str) -> list[dict]:
    lines: list[dict] = []
    screen: str | None = None
    agent = [s for s in trajectory.steps if s.source == "agent"]
    for number, step in enumerate(agent, start=1):
        for call, result in zip(step.tool_calls or [], step.observation.results if step.observation else [],
                                strict=False):
            extra = result.extra
            stamp = _stamp(extra.host_started_at if extra else None, step)
            if result.screenshot and (task_dir / result.screenshot).is_file():
                screen = writer.png(f"step_{number}_{stamp}.png", task_dir / result.screenshot)
            lines.append(_line(number, stamp, _action(call.function_name, call.arguments), step, screen,
                               {"tool_call_id": call.tool_call_id, "error": bool(extra and extra.error),
                                "result": _clip(result.text)}))
        if not step.tool_calls and step is agent[-1]:
            lines.append(_line(number, _stamp(None, step), last_action, step, screen, {}, done=True))
    return lines


def _line(number: int, stamp: str, action: Any, step: Step, screen: str | None, info: dict,
          done: bool = False) -> dict:
    return {"step_num": number, "action_timestamp": stamp, "action": action, "response": step.message,
            "reward": 0, "done": done, "info": info, "screenshot_file": screen}


def _action(function_name: str, arguments: dict) -> dict:
    tool, parameters = computer_use_tool(function_name, arguments) or (function_name, arguments)
    return {"action_type": tool, "parameters": parameters, "function_name": function_name}


def _stamp(at: str | None, step: Step) -> str:
    text = at or step.timestamp
    moment = datetime.fromisoformat(text.replace("Z", "+00:00")) if text else datetime.fromtimestamp(0)
    return moment.strftime(TIMESTAMP)


def _clip(content: object) -> object:
    if isinstance(content, str) and len(content) > INFO_TEXT_LIMIT:
        return content[:INFO_TEXT_LIMIT] + f"... [{len(content) - INFO_TEXT_LIMIT} more characters]"
    return content


def _trajectory(task_dir: Path) -> Trajectory | None:
    try:
        return Trajectory.model_validate_json((task_dir / TRAJECTORY_FILE).read_bytes())
    except (FileNotFoundError, ValueError):
        return None


def _raw_result(task_dir: Path) -> dict:
    try:
        value = orjson.loads((task_dir / RESULT_FILE).read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def _repeat_of(folder: str) -> int:
    _, sep, number = folder.rpartition(".r")
    return int(number) if sep and number.isdigit() else 1


class _Writer:
    """Files of one exported task, written atomically with the attempt's permissions."""

    def __init__(self, dest: Path, mode: int | None) -> None:
        self.dest, self.mode = dest, mode

    def bytes(self, name: str, data: bytes) -> str:
        write_atomic(self.dest / name, data)
        return self._with_mode(name)

    def png(self, name: str, jpeg: Path) -> str:
        out = io.BytesIO()
        with Image.open(jpeg) as image:
            image.save(out, format="PNG", compress_level=1)
        return self.bytes(name, out.getvalue())

    def copy(self, name: str, source: Path) -> str:
        with source.open("rb") as f:
            write_atomic_chunks(self.dest / name, iter(lambda: f.read(COPY_CHUNK), b""))
        return self._with_mode(name)

    def _with_mode(self, name: str) -> str:
        if self.mode is not None:
            os.chmod(self.dest / name, self.mode)
        return name
