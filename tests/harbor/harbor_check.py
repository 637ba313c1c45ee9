"""Read what hcu wrote with Harbor's own code, in the Harbor venv (Python >= 3.12; hcu's tests run it as a
program, never import it), and print what Harbor made of it as one JSON document:

    harbor_check.py trajectories FILE...   each file through harbor.utils.trajectory_validator and the model
    harbor_check.py jobs JOBS_DIR          every job folder as `harbor view` scans it, each record validated
                                           strictly with Harbor's models, Harbor's own stats and mean recomputed
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from harbor.metrics.mean import Mean
from harbor.models.job.config import JobConfig
from harbor.models.job.result import JobResult, JobStats
from harbor.models.trajectories import Trajectory
from harbor.models.trial.config import TrialConfig
from harbor.models.trial.result import TrialResult
from harbor.utils.trajectory_validator import TrajectoryValidator
from harbor.viewer.scanner import JobScanner


def trajectory(path: Path) -> dict[str, Any]:
    validator = TrajectoryValidator()
    report: dict[str, Any] = {"file": str(path), "valid": validator.validate(path), "errors": validator.get_errors()}
    if report["valid"]:
        model = Trajectory.model_validate_json(path.read_text())
        report |= {
            "schema_version": model.schema_version, "trajectory_id": model.trajectory_id,
            "agent": model.agent.name, "steps": [step.source for step in model.steps],
            "llm_call_count": [step.llm_call_count for step in model.steps],
            "multimodal": model.has_multimodal_content(),
            "images": [part.source.path for step in model.steps if step.observation
                       for result in step.observation.results if isinstance(result.content, list)
                       for part in result.content if part.type == "image"],
        }
    return report


def strict(model: Any, path: Path) -> tuple[Any, str | None]:
    try:
        return model.model_validate_json(path.read_text()), None
    except Exception as exc:  # the error is the finding
        return None, f"{path.name}: {exc}"


def trial(job_dir: Path, name: str, scanner: JobScanner, job: str) -> dict[str, Any]:
    folder = job_dir / name
    config, config_error = strict(TrialConfig, folder / "config.json")
    result, result_error = strict(TrialResult, folder / "result.json")
    report: dict[str, Any] = {"name": name, "errors": [e for e in (config_error, result_error) if e],
                              "scanned": scanner.get_trial_result(job, name) is not None,
                              "recording": (folder / "agent" / "recording.mp4").is_file()}
    if result is not None:
        tokens = result.compute_token_cost_totals()
        exception = result.exception_info
        report |= {
            "task_name": result.task_name, "source": result.source, "agent": result.agent_info.name,
            "model": result.agent_info.model_info.name if result.agent_info.model_info else None,
            "reward_valid": result.reward_valid,
            "rewards": result.verifier_result.rewards if result.verifier_result else None,
            "exception_type": exception.exception_type if exception else None,
            "exception_message": exception.exception_message if exception else None,
            "has_valid_reward": exception.policy.has_valid_reward if exception else None,
            "tokens": dict(zip(("input", "cache", "output", "cost_usd"), tokens, strict=True)),
            "agent_execution": result.agent_execution is not None,
        }
    trajectory_file = folder / "agent" / "trajectory.json"
    report["trajectory"] = trajectory(trajectory_file) if trajectory_file.is_file() else None
    return report


def jobs(jobs_dir: Path) -> dict[str, Any]:
    scanner = JobScanner(jobs_dir)
    out = []
    for job in scanner.list_jobs():
        job_dir = jobs_dir / job
        config, config_error = strict(JobConfig, job_dir / "config.json")
        result, result_error = strict(JobResult, job_dir / "result.json")
        trials = [trial(job_dir, name, scanner, job) for name in scanner.list_trials(job)]
        results = [scanner.get_trial_result(job, name) for name in scanner.list_trials(job)]
        recomputed = JobStats.from_trial_results([r for r in results if r is not None])
        rewarded = [r.verifier_result.rewards for r in results if r and r.reward_valid and r.verifier_result]
        out.append({
            "name": job, "errors": [e for e in (config_error, result_error) if e], "trials": trials,
            "n_attempts": config.n_attempts if config else None,
            "agents": [(a.name, a.model_name, a.kwargs) for a in config.agents] if config else None,
            "written_stats": result.stats.model_dump(mode="json") if result else None,
            "n_total_trials": result.n_total_trials if result else None,
            "harbor_stats": recomputed.model_dump(mode="json"),
            "harbor_mean": Mean().compute(rewarded) if rewarded else None,
        })
    return {"jobs": out}


def main(argv: list[str]) -> int:
    command, *args = argv
    if command == "trajectories":
        print(json.dumps([trajectory(Path(arg)) for arg in args]))
    elif command == "jobs":
        print(json.dumps(jobs(Path(args[0]))))
    else:
        print(f"unknown command {command!r}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
