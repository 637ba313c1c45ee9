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

from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from hcu.osworld.evidence.atif import Step, Trajectory
from hcu.osworld.evidence.cli_trace import computer_use_tool
from hcu.osworld.evidence.export_folder import EARLIER_OSWORLD_INDEX, FileWriter, claim_out_dir
from hcu.osworld.evidence.kept_attempts import KeptAttempt, kept_attempts
from hcu.osworld.evidence.recording import RECORDING_NAME
from hcu.osworld.evidence.redact import Redactor
from hcu.osworld.records.result import TaskResult
from hcu.record_io import write_atomic

TIMESTAMP = "%Y%m%d@%H%M%S%f"
"""OSWorld's action_timestamp (its runner's format)."""
INFO_TEXT_LIMIT = 2000


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
    """Raises ExportRefused when `out` is neither new, empty nor an earlier osworld export."""
    claim_out_dir(out, "osworld", run_dir)
    redactor = Redactor.for_run(run_dir)
    exported = []
    for attempt in kept_attempts(run_dir):
        name = model or (attempt.result.model if attempt.result else None) or "unknown-model"
        folder = out / action_space / observation_type / (name if attempt.repeat == 1 else f"{name}.r{attempt.repeat}")
        exported.append(export_task(attempt, folder, redactor))
    write_atomic(out / EARLIER_OSWORLD_INDEX, orjson.dumps([asdict(t) for t in exported], option=orjson.OPT_INDENT_2))
    return exported


def export_task(attempt: KeptAttempt, model_dir: Path, redactor: Redactor) -> ExportedTask:
    dest = model_dir / attempt.domain / attempt.task_id
    writer = FileWriter(dest, attempt.mode)
    trajectory, task_dir = attempt.trajectory, attempt.task_dir
    lines = traj_lines(trajectory, task_dir, writer, final_action(attempt.result)) if trajectory else []
    if attempt.score is None:
        lines.append({"Error": f"withheld: {attempt.withheld}"})
        writer.bytes("withheld.txt", f"{attempt.withheld}\n".encode())
    else:
        writer.bytes("result.txt", f"{attempt.score}\n".encode())
    writer.bytes("traj.jsonl", b"".join(orjson.dumps(redactor.value(line)) + b"\n" for line in lines))
    if (task_dir / RECORDING_NAME).is_file():
        writer.copy(RECORDING_NAME, task_dir / RECORDING_NAME)
    return ExportedTask(attempt.domain, attempt.task_id, attempt.repeat, str(dest), attempt.score, attempt.withheld,
                        sum(1 for line in lines if "step_num" in line), attempt.cost_usd)


def final_action(result: TaskResult | None) -> str:
    """OSWorld's last action for how the agent ended: FAIL when it declared the task infeasible."""
    return "FAIL" if result is not None and result.protocol_word == "TASK_INFEASIBLE" else "DONE"


def traj_lines(trajectory: Trajectory, task_dir: Path, writer: FileWriter, last_action: str) -> list[dict]:
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
