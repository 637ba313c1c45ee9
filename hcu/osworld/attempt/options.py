"""run_task's options: the reference flags, parsed into one validated record."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Literal, NoReturn

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hcu import REPO_ROOT
from hcu.osworld.queue.config import default_guide

DEFAULT_TEST_DESKTOP = "hcu-test-desktop:latest"
CHANNELS = ("gui", "a11y", "keyboard", "code")


class RunTaskOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    benchmark_version: Literal["v1", "v2"] = "v1"
    task_id: str = Field(min_length=1)
    task_domain: str | None = None
    tasks_dir: Path | None = None
    guest_image: str | None = None
    test_desktop: str | None = None
    volume_size: int | None = Field(default=None, gt=0)
    ram_size: str = "4G"
    client_password: str | None = None
    agent: Literal["codex", "claude-code", "gemini-cli", "grok-build"]
    model: str | None = None
    effort: str | None = None
    max_model_calls: int = Field(default=100, gt=0)
    token_log: Path | None = None
    gateway: str | None = None
    result_dir: Path | None = None
    channels: list[Literal["gui", "a11y", "keyboard", "code"]] = ["gui", "a11y", "keyboard"]
    instructions_file: Path | None = None
    """None = the guide for the channels (hybrid, ax-only or gui-only); Path("") = no guide."""
    base_instructions_file: Path = REPO_ROOT / "instructions" / "base.md"
    code_mode: bool = False
    timeout_seconds: float = Field(default=3600.0, ge=0)
    no_progress_seconds: float = Field(default=900.0, ge=0)
    rate_limit_resume_delay: float = Field(default=60.0, ge=0)
    run_id: str = "single"
    attempt: int = Field(default=1, ge=1)
    artifact_dir: Path = REPO_ROOT / "artifacts"
    agent_binary: Path | None = None
    mcp_binary: Path | None = None
    asset_cache: Path = REPO_ROOT / "assets"
    offline_assets: bool = False
    asset_mirror: str | None = None
    """Fetch cache misses from this base URL instead of the asset's own host (a local mirror)."""

    def resolved_result_dir(self) -> Path:
        if self.result_dir is not None:
            return self.result_dir
        tag = f"{self.task_id}-{self.agent}-{time.strftime('%Y%m%d-%H%M%S')}"
        return REPO_ROOT / "runs" / "single" / tag

    def guide_path(self) -> Path | None:
        if self.instructions_file is not None:
            return None if str(self.instructions_file) in ("", ".") else self.instructions_file
        return default_guide(self.channels)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m hcu.osworld.run_task", description="Run one OSWorld task.")
    a = p.add_argument
    a("--benchmark-version", default="v1")
    a("--task-id", required=True)
    a("--task-domain")
    a("--tasks-dir", help="folder of V1 task files (examples/<domain>/<id>.json); default: the checkout's")
    a("--guest-image", help="qcow2 of the official guest")
    a("--test-desktop", nargs="?", const=DEFAULT_TEST_DESKTOP, help="use the local test desktop image")
    a("--volume-size", type=int)
    a("--ram-size", default="4G")
    a("--client-password")
    a("--agent", required=True)
    a("--model")
    a("--effort")
    a("--max-model-calls", type=int, default=100)
    a("--token-log")
    a("--gateway", help="gateway base URL; default http://<docker bridge>:<agent's port>")
    a("--result-dir")
    a("--channels", default="gui,a11y,keyboard")
    a("--instructions-file", help='interaction guide; "" omits it (base.md stays)')
    a("--base-instructions-file")
    a("--code-mode", action="store_true")
    a("--timeout-seconds", type=float, default=3600.0)
    a("--no-progress-seconds", type=float, default=900.0)
    a("--rate-limit-resume-delay", type=float, default=60.0)
    a("--run-id", default="single")
    a("--attempt", type=int, default=1)
    a("--artifact-dir")
    a("--agent-binary")
    a("--mcp-binary")
    a("--asset-cache")
    a("--offline-assets", action="store_true")
    a("--asset-mirror", help="base URL of a local mirror that serves <host>/<path> of missing assets")
    return p


def parse_options(argv: list[str] | None = None) -> RunTaskOptions:
    """Parse and validate; a bad value exits 2 with one line naming the flag."""
    ns = vars(parser().parse_args(argv))
    ns["channels"] = [c.strip() for c in ns["channels"].split(",") if c.strip()]
    if ns["code_mode"] and "code" not in ns["channels"]:
        ns["channels"].append("code")
    if not ns["guest_image"] and not ns["test_desktop"]:
        fail("--guest-image: expected a qcow2 path (or --test-desktop)")
    values = {k: v for k, v in ns.items() if v is not None}
    try:
        return RunTaskOptions.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        flag = "--" + str(err["loc"][0]).replace("_", "-") if err["loc"] else "options"
        fail(f"{flag}: {err['msg']} (got {err.get('input')!r})")


def fail(message: str) -> NoReturn:
    print(f"run_task: {message}", file=sys.stderr)
    sys.exit(2)
