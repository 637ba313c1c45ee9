"""Isolation: strip inherited agent configuration from the guest, then put in only what hcu renders."""

from __future__ import annotations

import shlex
from pathlib import Path

from hcu.osworld.agents.base import AgentPlan
from hcu.osworld.errors import GuestError
from hcu.osworld.guest.api import GuestAPI
from hcu.osworld.guest.process import shell_command


def remove_inherited(api: GuestAPI, *, home: str, work_dir: str, client_password: str,
                     names: list[str], managed: list[str]) -> None:
    """Remove `names` (the agent CLIs' own configuration, memory and instruction files) from the guest user's home
    and the agent's working directory, and `managed` (their system-wide configuration folders) with sudo; fail if
    any of `names` survives."""
    names = sorted(set(names))
    script = "; ".join(
        f"cd {shlex.quote(d)} 2>/dev/null && rm -rf -- {' '.join(shlex.quote(n) for n in names)}"
        for d in dict.fromkeys([home, work_dir])
    )
    res = api.execute(["sh", "-c", script], timeout_sec=60)
    if res.returncode not in (0, None):
        raise GuestError(f"could not remove inherited agent files: {res.error.strip()[-200:]}")
    # Managed configs sit in /etc: only sudo removes them. The password is the guest's own, not a model credential.
    sudo = f"sudo -S -p '' rm -rf -- {' '.join(shlex.quote(path) for path in managed)}"
    api.execute(["sh", "-c", f"printf '%s\\n' {shlex.quote(client_password)} | {sudo}"], timeout_sec=60)
    leftover = api.execute(["sh", "-c", "; ".join(
        f"ls -d {shlex.quote(d)}/{n} 2>/dev/null" for d in dict.fromkeys([home, work_dir]) for n in names
    ) + "; true"], timeout_sec=60)
    if leftover.output.strip():
        raise GuestError(f"inherited agent files survived removal: {leftover.output.split()[:5]}")


def upload_plan(api: GuestAPI, plan: AgentPlan, extra: dict[str, Path]) -> None:
    """Upload every rendered file, the binaries from artifacts/ and `extra` (guest path -> host file)."""
    modes: dict[str, int] = {}
    for f in plan.files:
        data = f.data if f.data is not None else Path(f.host_path).read_bytes()
        api.upload(f.guest_path, data)
        modes[f.guest_path] = f.mode
    for guest_path, host_path in extra.items():
        api.upload(guest_path, host_path.read_bytes())
        modes[guest_path] = 0o755
    chmods = "; ".join(f"chmod {mode:o} {shlex.quote(p)}" for p, mode in modes.items())
    res = api.execute(["sh", "-c", chmods or "true"], timeout_sec=60)
    if res.returncode not in (0, None):
        raise GuestError(f"could not set file modes in the guest: {res.error.strip()[-200:]}")


def prepare_agent(api: GuestAPI, plan: AgentPlan, work_dir: str) -> None:
    """Run the plan's one-off preparation commands (e.g. unpacking a CLI) with its environment."""
    for argv in plan.prepare_argv:
        res = api.execute(["sh", "-c", shell_command(argv, env=plan.env, cwd=work_dir)], timeout_sec=110)
        if res.returncode != 0:
            raise GuestError(f"preparing the agent failed: {shlex.join(argv)[:120]}: {res.error.strip()[-200:]}")
