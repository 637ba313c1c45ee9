"""Real tier: a real agent CLI in a test desktop container, run by the runner's own agent phase (run_agent)
through the in-guest API, against the real gateway in front of the scripted policy; computer-use records its
calls into the call log, and the test reads what collect_evidence makes of it all."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson

from hcu import REPO_ROOT
from hcu.demo.stand_in import StandIn, scripted_stack
from hcu.osworld.agents import get_adapter
from hcu.osworld.agents.base import AgentAdapter, AgentContext, AgentPlan
from hcu.osworld.attempt.agent_phase import AgentLimits, AgentOutcome, run_agent
from hcu.osworld.attempt.gateway_watch import GatewayWatch
from hcu.osworld.attempt.isolation import prepare_agent, upload_plan
from hcu.osworld.attempt.scope_credential import GatewayCredential, gateway_credential
from hcu.osworld.evidence.atif import Trajectory
from hcu.osworld.evidence.collect import collect_evidence, guest_evidence_dir
from hcu.osworld.guest.api import GuestAPI
from tests.agents.conftest import ARTIFACTS, require_artifact
from tests.agents.live import Guest, desktop_container

HOME = "/home/user"
GUEST_ROOT = f"{HOME}/.hcu"
TASK = "Leave evidence of every step on the desktop."
PROMPT = f"{TASK}\nEnd with TASK_COMPLETE, TASK_INFEASIBLE or ASK_USER."


@dataclass
class LiveRun:
    agent: str
    guest: Guest
    api: GuestAPI
    stack: StandIn
    ctx: AgentContext
    adapter: AgentAdapter
    plan: AgentPlan
    credential: GatewayCredential
    result_dir: Path
    token_log: Path
    version: str

    def run_agent(self, **limits: float) -> AgentOutcome:
        gateway = GatewayWatch(self.stack.gateway_url, self.ctx.scope, away_sec=30.0, secret=self.credential.secret)
        settings = {"timeout_sec": 300.0, "no_progress_sec": 120.0, "resume_delay_sec": 1.0, "gateway_away_sec": 30.0,
                    "poll_sec": 0.5, **limits}
        return run_agent(self.api, self.adapter, self.plan, gateway=gateway, work_dir=HOME,
                         state_dir=f"{GUEST_ROOT}/run", result_dir=self.result_dir, token_log=self.token_log,
                         credential=self.credential, limits=AgentLimits(**settings))

    def collect(self, ended: str | None, **options: object) -> Trajectory:
        return collect_evidence(self.api, self.result_dir, agent=self.agent, ctx=self.ctx, agent_version=self.version,
                                token_log=self.token_log, ended=ended, secrets=[self.credential.secret],
                                attempt_id=f"evidence/{self.ctx.scope}/1", **options)

    def guest_records(self, kind: str) -> list[dict]:
        """The call log's records of one kind as they stand in the guest (to wait on)."""
        try:
            data = self.api.file(f"{self.ctx.call_log_dir}/calls.jsonl")
        except FileNotFoundError:
            return []
        return [r for r in map(orjson.loads, data.splitlines()) if r.get("kind") == kind]


def policy(steps: list[dict], *, final: str = "All steps done.\nTASK_COMPLETE", **extra: object) -> dict:
    return {"policies": {"evidence": {"match": TASK, "steps": steps, "final_message": final, **extra}}}


@contextmanager
def live_run(agent: str, tmp_path: Path, policies: dict, *, max_model_calls: int = 30,
             rate_limit_max_wait: float = 2.0, call_log: bool = True) -> Iterator[LiveRun]:
    adapter = get_adapter(agent)
    defaults = adapter.cli
    for artifact in defaults.artifacts:
        require_artifact(artifact.name)
    computer_use = require_artifact("computer-use")
    policy_file, token_log = tmp_path / "policies.json", tmp_path / "gateway-tokens.jsonl"
    policy_file.write_bytes(orjson.dumps(policies))
    result_dir = tmp_path / "result"
    result_dir.mkdir()
    scope = f"evidence-{agent}-{uuid.uuid4().hex[:6]}.a1"
    credential = gateway_credential(tmp_path / "gateway-scope.key", scope)
    with scripted_stack(agent, policy_file, token_log=token_log, max_model_calls=max_model_calls,
                        log_dir=tmp_path / "logs", rate_limit_max_wait=rate_limit_max_wait,
                        scope_key_file=tmp_path / "gateway-scope.key") as stack, \
            desktop_container("test-evidence", f"evidence-{agent}") as guest:
        ctx = AgentContext(
            scope=scope, gateway_url=stack.gateway_url, model=defaults.model, effort=defaults.effort,
            channels=["gui", "a11y", "keyboard"],
            base_instructions=(REPO_ROOT / "instructions" / "base.md").read_text(),
            profile_instructions=(REPO_ROOT / "instructions" / "hybrid.md").read_text(), prompt=PROMPT,
            session_id=str(uuid.uuid4()), gateway_token=credential.token, guest_root=GUEST_ROOT,
            computer_use_path=f"{GUEST_ROOT}/bin/computer-use",
            call_log_dir=guest_evidence_dir(GUEST_ROOT) if call_log else None)
        plan = adapter.plan(ctx, ARTIFACTS)
        api = GuestAPI(f"http://{guest_address(guest)}:5000", timeout_sec=60)
        upload_plan(api, plan, {ctx.computer_use_path: computer_use})
        prepare_agent(api, plan, HOME)
        version = guest.run(plan.version_argv, env=plan.env, timeout=180)[1].strip()
        # the first start of computer-use unpacks its compiled parts (as the runner's MCP probe does first)
        rc, _, err = guest.run([plan.mcp_server.command, *plan.mcp_server.args, "--list-tools"], timeout=180)
        assert rc == 0, f"computer-use does not start in the guest: {err[-1000:]}"
        yield LiveRun(agent, guest, api, stack, ctx, adapter, plan, credential, result_dir, token_log, version)


def guest_address(guest: Guest) -> str:
    guest.container.reload()
    return guest.container.attrs["NetworkSettings"]["IPAddress"]
