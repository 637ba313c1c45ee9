"""A config without `quota`: the forecast takes the limits the upstreams state in their answers, as the run's gateway
reports them (`/healthz` `upstream_limits`), and says so: `binding` names the observed limit, the dry run and
QUEUE_STATUS.md say the quota was observed, by which gateway and when. The real gateway in front of the scripted
upstream enforcing a deployment's quota as Azure does (hcu/scripted/rate_limits.py); no Docker."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import requests

from hcu.defaults import ADMISSION
from hcu.demo.stand_in import free_port
from hcu.osworld.guest.host import HOST_PROC_ENV
from hcu.osworld.queue.panel import run_queue
from hcu.osworld.queue.status import ActiveAttempt
from hcu.osworld.quota.gateway_reading import GatewayReport, fetch_report
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.run_config import TaskSpec, parse_config
from tests.queue.test_launch_pacing import ATTEMPT_SEC, POLL_SEC, MovingClock
from tests.quota.pilot import MODEL, PRICES, build_pilot
from tests.quota.test_dry_run import campaign_config, dry_run
from tests.quota.test_live_status import UsageExecutor

DEPLOYMENT_TPM = 60_000
"""The pilot's running attempt demands 26,520 tokens a minute at its 90th percentile: 2.26 of them fit."""


def _started(proc: subprocess.Popen[bytes], url: str) -> None:
    deadline = time.time() + 30
    while time.time() < deadline and proc.poll() is None:
        try:
            requests.get(url, timeout=1)
            return
        except requests.RequestException:
            time.sleep(0.1)
    raise AssertionError(f"{url} did not come up")


@pytest.fixture
def limited_gateway(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The gateway (Azure kind) in front of the scripted upstream whose deployment d1 has DEPLOYMENT_TPM and 360
    requests a minute; its URL and its label for the deployment."""
    limits = tmp_path / "rate-limits.json"
    limits.write_bytes(orjson.dumps({"deployments": {"d1": {"tpm": DEPLOYMENT_TPM, "rpm": 360}}}))
    up_port, gw_port = free_port(), free_port()
    upstream = subprocess.Popen([sys.executable, "-m", "hcu.scripted.upstream", "--port", str(up_port),
                                 "--rate-limits", str(limits)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    gateway = subprocess.Popen([sys.executable, "-m", "hcu.gateway.openai_proxy", "--host", "127.0.0.1", "--ports",
                                str(gw_port), "--upstreams", f"127.0.0.1:{up_port}@d1", "--upstream-kind", "azure",
                                "--upstream-scheme", "http", "--out", str(tmp_path / "gateway-tokens.jsonl"),
                                "--max-requests-per-task", "100"],
                               env={**os.environ, "OSW_OPENAI_UPSTREAM_TOKEN": "unused"}, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{gw_port}"
    try:
        _started(upstream, f"http://127.0.0.1:{up_port}/v1/models")
        _started(gateway, f"{url}/healthz")
        yield url, f"127.0.0.1:{up_port}@d1"
    finally:
        for proc in (gateway, upstream):
            proc.terminate()
            proc.wait(timeout=10)


def one_call(gateway: str, scope: str) -> None:
    """A generation through the gateway: the upstream's answer states its limits."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": "next step"}], "max_tokens": 16}
    requests.post(f"{gateway}/t/{scope}/v1/chat/completions", json=body, timeout=30,
                  headers={"Authorization": "Bearer placeholder"}).raise_for_status()


def test_the_dry_run_takes_the_limits_the_upstream_stated(tmp_path: Path, limited_gateway: tuple[str, str]) -> None:
    gateway, label = limited_gateway
    build_pilot(tmp_path / "pilot")
    config = campaign_config(tmp_path, gateway=gateway, quota=None)
    before = orjson.loads(dry_run(tmp_path, config, "--json").stdout)["forecast"]
    assert before["safe_concurrency"] is None and before["quota_from"].startswith("none (no upstream has stated")
    assert any("none was observed" in line for line in before["unknown"])

    one_call(gateway, "warmup.t1.a1")
    forecast = orjson.loads(dry_run(tmp_path, config, "--json").stdout)["forecast"]
    assert forecast["quota"]["tpm"] == {"per_minute": DEPLOYMENT_TPM, "of": f"observed tpm of {label}"}
    assert (forecast["safe_concurrency"], forecast["binding"]) == (2, f"observed tpm of {label}")
    assert forecast["quota_from"].startswith(f"observed by {gateway}: the limits the upstreams' answers stated, "
                                             f"newest seen {time.strftime('%Y-%m-%d', time.gmtime())}")
    printed = dry_run(tmp_path, config)
    assert printed.returncode == 0, printed.stderr
    assert f"  safe concurrency: 2 attempts at once (2.262; binding: observed tpm of {label}; at 2" in printed.stdout
    assert f"  quota from: observed by {gateway}: " in printed.stdout
    with_quota = orjson.loads(dry_run(tmp_path, campaign_config(tmp_path, gateway=gateway), "--json").stdout)
    assert (with_quota["forecast"]["binding"], with_quota["forecast"]["quota_from"]) == ("tpm of openai", "the config")


class CallingExecutor(UsageExecutor):
    """UsageExecutor's attempts, each making a model call through the gateway when it starts; the gateway's
    report is read as the local executor reads it."""

    def __init__(self, clock: MovingClock, gateway: str) -> None:
        super().__init__(clock, {})
        self.gateway = gateway

    def launch(self, task: TaskSpec, attempt: AttemptId, task_dir: Path) -> ActiveAttempt:
        one_call(self.gateway, attempt.gateway_scope)
        return super().launch(task, attempt, task_dir)

    def gateway_reports(self) -> list[GatewayReport] | None:
        report = fetch_report(self.gateway, "live.")
        return None if report is None else [report]


def test_the_status_says_the_quota_was_observed_once_the_upstream_stated_it(
        tmp_path: Path, limited_gateway: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    gateway, label = limited_gateway
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo").write_text(f"MemTotal: {16 << 20} kB\nMemAvailable: {8 << 20} kB\n")
    monkeypatch.setenv(HOST_PROC_ENV, str(tmp_path / "proc"))
    build_pilot(tmp_path / "pilot")
    config = parse_config({"run_id": "live", "benchmark_version": "v1", "agent": "codex", "test_desktop": True,
                           "gateway": gateway, "results_dir": str(tmp_path), "expected_durations_from": [],
                           "tasks": [f"t{i}" for i in range(12)], "max_active_tasks": 2, "launch_stagger_seconds": 0,
                           "forecast_from": ["pilot"], "prices": PRICES}, tmp_path / "live.json")
    clock = MovingClock()
    clock.stop_at = clock.now + ADMISSION.observe_sec + ATTEMPT_SEC  # read again after the first calls
    with pytest.raises(KeyboardInterrupt):
        run_queue(config, executor=CallingExecutor(clock, gateway), clock=clock, poll_interval_sec=POLL_SEC)
    status = (tmp_path / "live" / "QUEUE_STATUS.md").read_text()
    assert f"Quota: observed by {gateway}: the limits the upstreams' answers stated, newest seen " in status, status
    assert f"safe concurrency 2 (observed tpm of {label})" in status, status
