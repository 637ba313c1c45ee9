"""One attempt of one OSWorld task, end to end, in a fresh guest (what `python -m hcu.osworld.run_task` runs).

Phases run in order, each timed under one attempt id: load, boot, isolate, upload, setup, probe, agent,
settle, evaluate, collect, cleanup. Boot, setup, probe, agent and evaluate each end at `timeout_seconds`
with their own timeout type. A failure is classified by the phase that raised it (`hcu.osworld.errors`); a
stop signal ends the attempt as `interrupted` whatever the phase; result.json is always written and the
guest is always removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import time
import uuid
from pathlib import Path

import orjson

from hcu.computer_use.channels import parse_channels
from hcu.defaults import GUEST
from hcu.osworld.agents import get_adapter
from hcu.osworld.agents.base import AgentContext, AgentPlan
from hcu.osworld.attempt.agent_phase import AgentLimits, AgentOutcome, run_agent
from hcu.osworld.attempt.app_check import AppCheck
from hcu.osworld.attempt.cost import cost_for_scope
from hcu.osworld.attempt.gateway_watch import GatewayWatch
from hcu.osworld.attempt.identity import AttemptId
from hcu.osworld.attempt.interrupts import StopSignals
from hcu.osworld.attempt.isolation import prepare_agent, remove_inherited, upload_plan
from hcu.osworld.attempt.lease import lease_for_this_process
from hcu.osworld.attempt.options import RunTaskOptions
from hcu.osworld.attempt.phases import PhaseLog
from hcu.osworld.attempt.probe import check_executables, check_gateway_from_guest, check_mcp
from hcu.osworld.attempt.result import TaskResult
from hcu.osworld.attempt.scope_credential import check_scope_key, gateway_credential
from hcu.osworld.attempt.usage import usage_for_scope
from hcu.osworld.errors import (
    BootTimeout,
    ConfigurationError,
    EvaluationTimeout,
    EvaluatorError,
    Interrupted,
    PhaseError,
    ProbeTimeout,
    SetupTimeout,
    counted_score,
)
from hcu.osworld.guest.api import GuestAPIError
from hcu.osworld.guest.bridge import bridge_address
from hcu.osworld.guest.lifecycle import Guest, GuestSpec, remove_guest, start_guest
from hcu.osworld.osworld_bridge import stand_ins
from hcu.osworld.osworld_bridge.assets import AssetCache
from hcu.osworld.osworld_bridge.evaluate import ensure_evaluator_loads, evaluate
from hcu.osworld.osworld_bridge.process import OSWorldCodeError, OSWorldProcess, resolve_python
from hcu.osworld.osworld_bridge.setup import osworld_process, run_setup, task_cache_dir
from hcu.osworld.queue.admission import admission_from_env
from hcu.osworld.settings import INSTRUCTIONS
from hcu.osworld.tasks import load_task
from hcu.record_io import write_atomic, write_json, write_record

log = logging.getLogger("hcu.run_task")

GUEST_HOME = GUEST.home
GUEST_ROOT = f"{GUEST_HOME}/.hcu"
PROTOCOL = ("\n\nWhen you finish, end your final message with TASK_COMPLETE on its own line; if the task cannot be "
            "done, end with TASK_INFEASIBLE; if you need the user, end with ASK_USER.")


def run_task(opts: RunTaskOptions, stops: StopSignals | None = None) -> TaskResult:
    """Run the attempt; `stops` (installed by the command) turns SIGTERM/SIGINT into `interrupted`."""
    stops = stops or StopSignals()
    result_dir = opts.resolved_result_dir()
    result_dir.mkdir(parents=True, exist_ok=True)
    attempt = AttemptId(run_id=opts.run_id, task_id=opts.task_id, attempt=opts.attempt, repeat=opts.repeat)
    phases = PhaseLog(str(attempt), on_change=lambda name: write_json(
        result_dir / "progress.json", {"phase": name, "since": time.time()}), admit=admission_from_env())
    run = _Attempt(opts, attempt, result_dir, phases)
    started = time.time()
    result = TaskResult(status="error", attempt_id=str(attempt), run_id=attempt.run_id, task_id=attempt.task_id,
                        attempt=attempt.attempt, repeat=attempt.repeat, benchmark_version=opts.benchmark_version,
                        agent=opts.agent, started_at=started)
    try:
        with stops.armed():
            write_record(result_dir / "attempt.json", lease_for_this_process(attempt, result_dir))
            run.execute(result)
    except Interrupted as exc:  # whatever phase it reached: never that phase's failure
        _fail(result, "interrupted", str(exc))
    except PhaseError as exc:
        _fail(result, exc.classification, str(exc))
    except GuestAPIError as exc:  # the guest stopped answering: infrastructure, whatever the phase
        _fail(result, "guest", str(exc))
    except Exception as exc:  # a bug in hcu: recorded, never read as an agent or infrastructure failure
        log.exception("runner error")
        _fail(result, "runner", f"{type(exc).__name__}: {exc}")
    finally:  # stop signals are held until the record is written (interrupts.StopSignals)
        run.finish(result)
        result.phases = phases.phases
        result.finished_at = time.time()
        result.duration_sec = round(result.finished_at - started, 3)
        write_record(result_dir / "result.json", result)
    return result


def _fail(result: TaskResult, classification: str, message: str) -> None:
    """Record a failure: an evaluator failure keeps status evaluator_error; the score is what the error table
    says (0 when the budget or the timeout had already ended the task, else withheld)."""
    result.status = "evaluator_error" if classification == "evaluator" else "error"
    result.failure_classification, result.failure_message = classification, message
    result.score = counted_score(classification, result.termination_reason, None)


class _Attempt:
    """The state one attempt carries through its phases."""

    def __init__(self, opts: RunTaskOptions, attempt: AttemptId, result_dir: Path, phases: PhaseLog) -> None:
        self.opts, self.attempt, self.result_dir, self.phases = opts, attempt, result_dir, phases
        self.guest: Guest | None = None
        self.meta: dict = {"attempt_id": str(attempt)}

    def execute(self, result: TaskResult) -> None:
        o, phase = self.opts, self.phases.phase
        timeout = o.timeout_seconds
        with phase("load"):
            o = self.opts = o.resolved(Path.cwd(), bridge_address)
            task = load_task(o.benchmark_version, o.task_id, o.task_domain, o.tasks_dir, o.osworld_python)
            try:
                self.meta["osworld_python"] = str(resolve_python(o.osworld_python))
            except OSWorldCodeError as exc:
                raise ConfigurationError(str(exc)) from None
            adapter = get_adapter(o.agent)
            result.task_domain, result.model, result.effort = task.domain, o.model, o.effort
            credential = gateway_credential(o.scope_key_file, self.attempt.gateway_scope)
            ctx = self._context(task.instruction, credential.token)
            self.meta.update(task_sha256=task.sha256, gateway=o.gateway, scope=self.attempt.gateway_scope,
                             session_id=ctx.session_id)
            # Rendered before any guest starts, so a missing binary costs nothing.
            plan = adapter.plan(ctx, o.artifact_dir, o.agent_binary)
            if not o.mcp_binary.is_file():
                raise ConfigurationError(f"mcp_binary: {o.mcp_binary} does not exist (run `make build-local`)")
        with phase("boot", timeout_sec=timeout, overrun=BootTimeout):
            spec = GuestSpec.for_settings(o)
            try:
                self.guest = start_guest(spec, self.attempt, work_dir=self.result_dir / ".guest",
                                         boot_timeout_sec=math.inf)  # the phase's own deadline ends the boot
            except BaseException as exc:  # where the boot stopped, for meta.json
                self.meta["guest"] = {"readiness": [s.model_dump(mode="json") for s in getattr(exc, "readiness", [])],
                                      "console_log": getattr(exc, "console_log", None)}
                raise
            self._record_guest(spec)
        api = self.guest.api
        with phase("isolate"):
            remove_inherited(api, home=GUEST_HOME, work_dir=GUEST_HOME, client_password=spec.client_password,
                             names=list(adapter.inherited_paths))
        with phase("upload"):
            upload_plan(api, plan, {ctx.computer_use_path: o.mcp_binary})
            self.meta["artifacts"] = _artifact_identity(plan, o.artifact_dir, o.mcp_binary)
            prepare_agent(api, plan, GUEST_HOME)
        cache_dir = task_cache_dir(self.result_dir / ".osworld-cache", task)
        assets = AssetCache.configured(o.asset_cache, offline=o.offline_assets, mirror=o.asset_mirror,
                                       stand_ins=o.asset_stand_ins)
        result.stand_ins = assets.stand_ins  # generated task files: marked, never part of a scored run
        with phase("setup", timeout_sec=timeout, overrun=SetupTimeout), self._osworld(cache_dir, "setup") as osw:
            ensure_evaluator_loads(osw, task)  # a task that can never be scored spends no agent budget
            if assets.stand_ins:
                stand_ins.provide(osw, task, assets)
            self.meta["setup_steps"] = [s.model_dump(mode="json") for s in run_setup(
                osw, task, password=spec.client_password, cache_dir=cache_dir, assets=assets,
                step_deadline_sec=timeout, check=AppCheck(self.guest))]
        with phase("probe", timeout_sec=timeout, overrun=ProbeTimeout):
            self.meta["gateway_health"] = check_gateway_from_guest(api, o.gateway, o.max_model_calls)
            if unprotected := check_scope_key(self.meta["gateway_health"], credential, o.gateway):
                log.warning(unprotected)
            self.meta["agent_version"] = check_executables(api, plan, GUEST_HOME)
            self.meta["mcp_probe"] = check_mcp(api, plan, ctx.channels).model_dump(mode="json")
        with phase("agent"):  # its timeout is extended by rate-limit waits (agent_phase.py)
            gateway = GatewayWatch(o.gateway, self.attempt.gateway_scope, away_sec=o.gateway_away_seconds,
                                   secret=credential.secret)
            outcome = run_agent(api, adapter, plan, gateway=gateway, work_dir=GUEST_HOME,
                                state_dir=f"{GUEST_ROOT}/run", result_dir=self.result_dir, token_log=o.token_log,
                                credential=credential,
                                limits=AgentLimits(timeout_sec=timeout, no_progress_sec=o.no_progress_seconds,
                                                   resume_delay_sec=o.rate_limit_resume_delay,
                                                   gateway_away_sec=o.gateway_away_seconds))
        self._apply_outcome(result, outcome)
        if outcome.failure_classification:
            for name in ("settle", "evaluate"):
                self.phases.skipped(name, f"not scored: {outcome.failure_classification}")
            return
        with phase("settle"):  # OSWorld's runner sleeps before env.evaluate(): let the last action land
            result.settle_seconds = o.settle_seconds
            time.sleep(o.settle_seconds)
        with phase("evaluate", timeout_sec=timeout, overrun=EvaluationTimeout):
            write_atomic(self.result_dir / "final-before-eval.png", api.screenshot())
            try:
                with self._osworld(cache_dir, "evaluate") as osw:
                    scored = evaluate(osw, task, agent_last_action=outcome.last_action,
                                      password=spec.client_password, cache_dir=cache_dir, assets=assets,
                                      deadline_sec=timeout)
            except OSWorldCodeError as exc:  # the OSWorld process did not start: still no score, never a zero
                raise EvaluatorError(str(exc)) from None
            finally:
                self._screenshot("final-after-eval.png")
        result.status = "completed"
        result.evaluator_score = scored.score
        result.getters_read_nothing = scored.getters_read_nothing  # the score stands; summary.md lists them
        result.score = counted_score(None, outcome.termination_reason, scored.score)

    def _osworld(self, cache_dir: Path, what: str) -> contextlib.AbstractContextManager[OSWorldProcess]:
        """OSWorld's code for one phase, in its own process (a deadline kills it, and all it started)."""
        return osworld_process(self.guest, cache_dir, osworld_python=self.opts.osworld_python,
                               offline_assets=self.opts.offline_assets, what=f"{self.attempt} {what}")

    def _context(self, instruction: str, gateway_token: str) -> AgentContext:
        o = self.opts
        guide = o.guide_path()
        profile = guide.read_text() if guide else ""
        if o.code_mode:
            profile += "\n\n" + (INSTRUCTIONS / "hybrid-code.md").read_text()
        return AgentContext(
            scope=self.attempt.gateway_scope, gateway_url=o.gateway, model=o.model, effort=o.effort,
            channels=list(parse_channels(",".join(o.channels), code_mode=o.code_mode)), code_mode=o.code_mode,
            base_instructions=o.base_instructions_file.read_text(), profile_instructions=profile or None,
            prompt=instruction + PROTOCOL, session_id=str(uuid.uuid4()), guest_home=GUEST_HOME,
            guest_root=GUEST_ROOT, computer_use_path=f"{GUEST_ROOT}/bin/computer-use", gateway_token=gateway_token)

    def _apply_outcome(self, result: TaskResult, outcome: AgentOutcome) -> None:
        result.termination_reason = outcome.termination_reason
        result.termination_detail = outcome.termination_detail
        result.protocol_word = outcome.protocol_word
        result.rate_limit_resumes = outcome.rate_limit_resumes
        self.meta["agent"] = outcome.model_dump(mode="json")
        if outcome.failure_classification:
            _fail(result, outcome.failure_classification, outcome.failure_message or "")

    def _record_guest(self, spec: GuestSpec) -> None:
        g = self.guest
        self.meta["guest"] = {
            "spec": spec.model_dump(mode="json", exclude={"client_password"}),
            "container_id": g.container_id, "host": g.host, "ports": g.ports.model_dump(),
            "container_image": g.container_image.model_dump(),
            "readiness": [s.model_dump(mode="json") for s in g.readiness],
        }

    def _screenshot(self, name: str) -> None:
        try:
            write_atomic(self.result_dir / name, self.guest.api.screenshot())
        except Exception as exc:  # evidence is best effort once the score is decided
            log.warning("screenshot %s failed: %s", name, exc)

    def finish(self, result: TaskResult) -> None:
        """collect + cleanup: always run, whatever happened before."""
        o = self.opts
        with self.phases.phase("collect"):
            if o.token_log is not None:
                result.usage = usage_for_scope(o.token_log, self.attempt.gateway_scope)
                result.cost_usd = cost_for_scope(o.token_log, self.attempt.gateway_scope, o.prices)
        try:
            with self.phases.phase("cleanup"):
                if self.guest is not None:
                    remove_guest(self.guest)
        except Exception as exc:
            log.error("cleanup failed: %s", exc)
        write_json(self.result_dir / "meta.json", self.meta)


def _artifact_identity(plan: AgentPlan, artifact_dir: Path, mcp: Path) -> dict:
    """Versions and hashes of the files that ran in the guest: agents.json's record (fetch-agents.sh) for a
    file taken from artifact_dir, the file's own sha256 for any other (an agent_binary from elsewhere)."""
    index = artifact_dir / "agents.json"
    known = orjson.loads(index.read_bytes()) if index.is_file() else {}
    identity = {}
    for upload in plan.files:
        path = upload.host_path
        if path is None:
            continue
        entry = known.get(path.name) if path.parent == artifact_dir else None
        identity[path.name] = {"path": str(path), **(entry or {"sha256": _sha256(path)})}
    identity["computer-use"] = {"path": str(mcp), "sha256": _sha256(mcp)}
    return identity


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
