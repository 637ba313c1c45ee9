"""The phases an attempt with an agent adds to the guest's: render the agent's plan, strip inherited agent
configuration (isolate), upload the CLI and computer-use, check the gateway, the executables and the MCP
transport from inside the guest (probe), run the agent, let the last action settle, collect usage.

The upload, then the probe, run alongside setup (pipeline.py): the upload with the checks of what it uploaded
(the CLI's `--version`, computer-use unpacking itself once), the probe checking the gateway as the guest sees it
and then the MCP transport, neither touching the desktop; the agent waits for both."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import orjson

from hcu.computer_use.channels import parse_channels
from hcu.defaults import GUEST
from hcu.osworld.agents import INHERITED_PATHS, MANAGED_CONFIG, get_adapter
from hcu.osworld.agents.base import GUEST_ROOT, AgentAdapter, AgentContext, AgentPlan
from hcu.osworld.attempt.agent_phase import AgentLimits, AgentOutcome, run_agent
from hcu.osworld.attempt.gateway_health import GatewayHealth
from hcu.osworld.attempt.gateway_watch import GatewayWatch
from hcu.osworld.attempt.guest_phases import AttemptState
from hcu.osworld.attempt.isolation import prepare_agent, remove_inherited, upload_plan
from hcu.osworld.attempt.meta import ArtifactRecord
from hcu.osworld.attempt.probe import check_executables, check_gateway_from_guest, check_mcp, unpack_mcp_server
from hcu.osworld.attempt.scope_credential import GatewayCredential, check_scope_key, gateway_credential
from hcu.osworld.errors import ConfigurationError
from hcu.osworld.evidence.collect import TrajectoryReport, collect_evidence, guest_evidence_dir
from hcu.osworld.evidence.recording import recording
from hcu.osworld.records.cost import cost_for_scope
from hcu.osworld.records.result import Usage
from hcu.osworld.records.usage import usage_for_scope
from hcu.osworld.settings import INSTRUCTIONS, AttemptSettings
from hcu.record_io import sha256_of_file

log = logging.getLogger("hcu.run_task")

PROTOCOL = ("\n\nWhen you finish, end your final message with TASK_COMPLETE on its own line; if the task cannot be "
            "done, end with TASK_INFEASIBLE; if you need the user, end with ASK_USER.")
NO_AGENT_RENDERED = "the attempt ended before its agent's instruction was rendered (load): no step to keep"


@dataclass
class AgentAttempt(AttemptState[AttemptSettings]):
    """An attempt with an agent: what its phases add to the guest's state."""

    adapter: AgentAdapter | None = None
    context: AgentContext | None = None
    plan: AgentPlan | None = None
    credential: GatewayCredential | None = None
    outcome: AgentOutcome | None = None
    usage: Usage | None = None
    cost_usd: float | None = None


def render_agent(state: AgentAttempt) -> None:
    """The agent's plan, rendered before any guest starts: a missing binary costs nothing."""
    s, task = state.settings, state.task
    assert task is not None
    state.adapter = get_adapter(s.agent)
    state.credential = gateway_credential(s.scope_key_file, state.attempt.gateway_scope)
    state.context = _context(s, state.attempt.gateway_scope, task.instruction, state.credential.token)
    state.meta.gateway, state.meta.scope = s.gateway, state.attempt.gateway_scope
    state.meta.session_id = state.context.session_id
    state.plan = state.adapter.plan(state.context, s.artifact_dir, s.agent_binary)
    if not s.mcp_binary.is_file():
        raise ConfigurationError(f"mcp_binary: {s.mcp_binary} does not exist (run `make build-local`)")


def isolate(state: AgentAttempt) -> None:
    assert state.guest is not None and state.adapter is not None
    remove_inherited(state.guest.api, home=GUEST.home, work_dir=GUEST.home,
                     client_password=state.guest.spec.client_password, names=list(INHERITED_PATHS),
                     managed=list(MANAGED_CONFIG))


def upload(state: AgentAttempt) -> None:
    """The CLI, computer-use and the rendered files; then the CLI runs (`--version`) and computer-use unpacks
    itself once, so the MCP probe and the agent find it ready."""
    assert state.guest is not None and state.plan is not None and state.context is not None
    s, api = state.settings, state.guest.api
    upload_plan(api, state.plan, {state.context.computer_use_path: s.mcp_binary})
    state.meta.artifacts = artifact_identity(state.plan, s.artifact_dir, s.mcp_binary)
    prepare_agent(api, state.plan, GUEST.home)
    state.meta.agent_version = check_executables(api, state.plan, GUEST.home)
    unpack_mcp_server(api, state.plan.mcp_server)


def probe(state: AgentAttempt) -> None:
    """No model call happens before the gateway (its budget and scope key), the executables and the MCP
    transport all pass."""
    assert state.guest is not None and state.plan is not None and state.context is not None
    assert state.credential is not None
    s, api = state.settings, state.guest.api
    health = check_gateway_from_guest(  # as the agent will ask: its scope, its credential
        api, s.gateway, s.max_model_calls, scope=state.attempt.gateway_scope, token=state.credential.token)
    state.meta.gateway_health = GatewayHealth.model_validate(health)
    if unprotected := check_scope_key(health, state.credential, s.gateway):
        log.warning(unprotected)
    state.meta.mcp_probe = check_mcp(api, state.plan.mcp_server, state.context.channels)


def agent(state: AgentAttempt) -> None:
    """The agent until it ends; its timeout is extended by rate-limit waits (agent_phase.py)."""
    assert state.guest is not None and state.plan is not None and state.adapter is not None
    assert state.credential is not None
    s = state.settings
    gateway = GatewayWatch(s.gateway, state.attempt.gateway_scope, away_sec=s.gateway_away_seconds,
                           secret=state.credential.secret)
    with recording(state.guest.api, state.result_dir, enabled=s.record_video) as report:
        state.meta.recording = report  # a recording that fails never fails the attempt: the report says why
        state.outcome = run_agent(state.guest.api, state.adapter, state.plan, gateway=gateway, work_dir=GUEST.home,
                                  state_dir=f"{GUEST_ROOT}/run", result_dir=state.result_dir, token_log=s.token_log,
                                  credential=state.credential, limits=AgentLimits.of(s))
    state.meta.agent = state.outcome


def not_scored(state: AgentAttempt) -> str | None:
    """Why settle and evaluate do not run: the agent phase ended the attempt without a score."""
    if state.outcome is not None and state.outcome.failure_classification:
        return f"not scored: {state.outcome.failure_classification}"
    return None


def settle(state: AgentAttempt) -> None:
    """OSWorld's runner sleeps before env.evaluate(): let the last action land."""
    time.sleep(state.settings.settle_seconds)


def collect(state: AgentAttempt) -> None:
    """Whatever ended the attempt: its usage and cost, from the gateway's token-log rows of its scope, and its
    evidence, trajectory.json with the step screenshots (the guest is still up: cleanup comes after)."""
    s = state.settings
    if s.token_log is not None:
        state.usage = usage_for_scope(s.token_log, state.attempt.gateway_scope)
        state.cost_usd = cost_for_scope(s.token_log, state.attempt.gateway_scope, s.prices)
    if state.context is None or state.adapter is None:  # no instruction was rendered: not even a first step
        state.meta.trajectory = TrajectoryReport(written=False, why_not=NO_AGENT_RENDERED)
        return
    try:
        trajectory = collect_evidence(
            state.guest.api if state.guest else None, state.result_dir, agent=state.adapter.cli.name,
            ctx=state.context, agent_version=state.meta.agent_version, token_log=s.token_log, prices=s.prices,
            ended=_ended(state), secrets=[state.credential.secret if state.credential else None],
            attempt_id=str(state.attempt))
    except Exception as exc:  # evidence never decides an outcome; meta.json says what is missing
        log.error("[%s] evidence not collected: %s", state.attempt, exc)
        state.meta.evidence_error = f"{type(exc).__name__}: {exc}"
        state.meta.trajectory = TrajectoryReport(written=False, why_not=state.meta.evidence_error)
    else:
        state.meta.trajectory = TrajectoryReport.of(trajectory)


def _ended(state: AgentAttempt) -> str | None:
    """Why the attempt ended, as the trajectory records it: the agent's outcome, or the failure that ended it."""
    if state.outcome is not None:
        return state.outcome.failure_classification or state.outcome.termination_reason
    return state.failure.classification if state.failure else None


def _context(s: AttemptSettings, scope: str, instruction: str, gateway_token: str) -> AgentContext:
    guide = s.guide_path()
    profile = guide.read_text() if guide else ""
    if s.code_mode:
        profile += "\n\n" + (INSTRUCTIONS / "hybrid-code.md").read_text()
    return AgentContext(
        scope=scope, gateway_url=s.gateway, model=s.model, effort=s.effort,
        channels=list(parse_channels(",".join(s.channels), code_mode=s.code_mode)), code_mode=s.code_mode,
        base_instructions=s.base_instructions_file.read_text(), profile_instructions=profile or None,
        prompt=instruction + PROTOCOL, session_id=str(uuid.uuid4()), gateway_token=gateway_token,
        call_log_dir=guest_evidence_dir(GUEST_ROOT))


def artifact_identity(plan: AgentPlan, artifact_dir: Path, mcp: Path) -> dict[str, ArtifactRecord]:
    """Versions and hashes of the files that ran in the guest: agents.json's record (fetch-agents.sh) for a
    file taken from artifact_dir, the file's own sha256 for any other (an agent_binary from elsewhere)."""
    index = artifact_dir / "agents.json"
    known = orjson.loads(index.read_bytes()) if index.is_file() else {}
    identity = {}
    for upload_ in plan.files:
        path = upload_.host_path
        if path is None:
            continue
        entry = known.get(path.name) if path.parent == artifact_dir else None
        record = entry or {"sha256": sha256_of_file(path)}
        identity[path.name] = ArtifactRecord.model_validate({"path": str(path), **record})
    identity["computer-use"] = ArtifactRecord(path=str(mcp), sha256=sha256_of_file(mcp))
    return identity

