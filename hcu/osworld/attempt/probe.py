"""Checks between setup and the agent: the gateway from inside the guest, the executables, the MCP probe.
No model call happens before all three pass; each failure is classified here, where it happens."""

from __future__ import annotations

import shlex

import orjson

from hcu.defaults import GUEST
from hcu.osworld.agents.base import AgentPlan, McpServerSpec
from hcu.osworld.attempt.gateway_health import check_budget
from hcu.osworld.attempt.mcp_probe import ProbeReport, probe
from hcu.osworld.errors import GatewayError, ProbeError
from hcu.osworld.guest.api import GuestAPI
from hcu.osworld.guest.process import shell_command

GUEST_HEALTHZ = (
    "import json, sys, urllib.error, urllib.parse, urllib.request\n"
    "url = sys.argv[1] + '/healthz?' + urllib.parse.urlencode({'task': sys.argv[2]})\n"
    "ask = urllib.request.Request(url, headers={'Authorization': 'Bearer ' + sys.argv[3]})\n"
    "try:\n"
    "    with urllib.request.urlopen(ask, timeout=10) as r:\n"
    "        print(json.dumps(json.load(r)))\n"
    "except urllib.error.HTTPError as e:\n"
    "    print(json.dumps({'status': e.code, 'answer': e.read(300).decode('utf-8', 'replace')}))\n"
    "    sys.exit(3)\n"
)
"""Run in the guest: the gateway's /healthz as the agent's scope and credential see it (the gateway shows its
details only to the holder of a scope's secret). The credential is the guest's own, on a guest command line."""
REFUSED_RC = 3


def check_gateway_from_guest(api: GuestAPI, gateway_url: str, max_model_calls: int, *, scope: str,
                             token: str) -> dict:
    """The guest reaches the gateway, as the agent will (its scope, its credential), and the gateway enforces the
    budget this run was configured with."""
    res = api.execute(["python3", "-c", GUEST_HEALTHZ, gateway_url.rstrip("/"), scope, token], timeout_sec=30)
    if res.returncode not in (0, REFUSED_RC):
        raise GatewayError(f"the guest cannot reach the gateway at {gateway_url}: {tail(res.error)}")
    try:
        answer = orjson.loads(res.output)
    except orjson.JSONDecodeError:
        answer = None
    if not isinstance(answer, dict):
        raise GatewayError(f"the gateway at {gateway_url} answered /healthz with something else than a JSON object")
    if res.returncode == REFUSED_RC:
        hint = ": give the runner the gateway's --scope-key-file" if answer.get("status") == 403 else ""
        raise GatewayError(f"the gateway at {gateway_url} refused this attempt's scope {scope} on /healthz "
                           f"(HTTP {answer.get('status')}: {tail(answer.get('answer'))}){hint}")
    check_budget(answer, max_model_calls, gateway_url)
    return answer


def check_executables(api: GuestAPI, plan: AgentPlan, work_dir: str) -> str:
    """The agent CLI runs in the guest (`--version`); returns what it printed."""
    cmd = shell_command(plan.version_argv, env=plan.env, cwd=work_dir)
    res = api.execute(["sh", "-c", cmd], timeout_sec=120)
    if res.returncode != 0:
        raise ProbeError(f"{shlex.join(plan.version_argv[:1])} --version failed in the guest "
                         f"(rc {res.returncode}): {tail(res.error or res.output)}")
    return res.output.strip().splitlines()[-1] if res.output.strip() else ""


def unpack_mcp_server(api: GuestAPI, server: McpServerSpec) -> None:
    """Run computer-use once as the CLI will (`--list-tools`): it unpacks its compiled parts, so the probe's and
    the agent's first start do not."""
    cmd = shell_command([server.command, *server.args, "--list-tools"], env=server.env, cwd=GUEST.home)
    res = api.execute(["sh", "-c", cmd], timeout_sec=120)
    if res.returncode != 0:
        raise ProbeError(f"{server.command} --list-tools failed in the guest (rc {res.returncode}): "
                         f"{tail(res.error or res.output)}")


def check_mcp(api: GuestAPI, server: McpServerSpec, channels: list[str]) -> ProbeReport:
    """Start computer-use exactly as `server` says (as the CLI will) and require evidence from its tools."""

    def run_in_guest(argv: list[str], timeout_sec: float) -> tuple[int, str, str]:
        res = api.execute(argv, timeout_sec=timeout_sec)
        return (res.returncode if res.returncode is not None else -1), res.output, res.error

    report = probe(run_in_guest, command=server.command, args=list(server.args), env=dict(server.env),
                   channels=list(channels), screen_size=api.screen_size())
    report.raise_for_failure()
    return report


def tail(text: str | None, limit: int = 300) -> str:
    text = (text or "").strip()
    return text[-limit:] if text else "(no output)"
