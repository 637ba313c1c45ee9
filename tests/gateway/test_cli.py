"""The gateways as processes: exact commands, bad input, kill -9 and restart, no credential anywhere."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from hcu import REPO_ROOT
from hcu.gateway.scope_secret import key_id, load_or_create_key, scope_secret
from hcu.gateway.tokenlog import read_token_log
from hcu.scripted.replies import Hang, HttpFault, TextReply

from .conftest import PLACEHOLDER, SECRET, free_port, start_gateway_process, wait_healthy


def run_cli(module: str, args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base_env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    return subprocess.run(
        [sys.executable, "-m", f"hcu.gateway.{module}", *args],
        cwd=REPO_ROOT,
        env={**base_env, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def openai_args(out: Path, *extra: str) -> list[str]:
    return ["--host", "127.0.0.1", "--ports", "1", "--out", str(out), "--max-requests-per-task", "5", *extra]


BAD_OPENAI = [
    (["--upstreams", "https://r1.openai.azure.com"], "--upstreams"),
    (["--upstreams", "r1@"], "--upstreams"),
    (["--upstreams", "r1:99999"], "--upstreams"),
    (["--upstreams", "ok.host,bad host"], "--upstreams"),
    (["--upstreams", "h", "--upstream-kind", "openai"], "OSW_OPENAI_UPSTREAM_TOKEN"),
    (["--upstreams", "h", "--upstream-kind", "gcp"], "--upstream-kind"),
    (["--upstreams", "h", "--upstream-token", "t", "--pin-resources", "a,,b"], "--pin-resources"),
    (["--upstreams", "h", "--upstream-token", "t", "--rate-limit-max-wait", "-1"], "--rate-limit-max-wait"),
    (["--upstreams", "h", "--upstream-token", "t", "--header-timeout", "0"], "--header-timeout"),
    (["--upstreams", "h", "--upstream-token", "t", "--upstream-idle-timeout", "x"], "--upstream-idle-timeout"),
    (["--upstreams", "h", "--upstream-token", "t", "--max-connections-per-peer", "0"], "--max-connections-per-peer"),
]


@pytest.mark.parametrize(("extra", "flag"), BAD_OPENAI)
def test_bad_openai_flags_one_line_exit_2_nothing_written(tmp_path, extra, flag):
    out = tmp_path / "tokens.jsonl"
    result = run_cli("openai_proxy", openai_args(out, *extra))
    assert result.returncode == 2 and flag in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_bad_out_and_ports(tmp_path):
    blocker = tmp_path / "blocker"  # a file where --out needs a folder
    blocker.write_text("kept")
    for out in (blocker / "t.jsonl", tmp_path):
        result = run_cli("openai_proxy", openai_args(out, "--upstreams", "h", "--upstream-token", "t"))
        assert (result.returncode, result.stderr.count("\n")) == (2, 1) and "--out" in result.stderr
    assert blocker.read_text() == "kept"
    blocker.unlink()
    result = run_cli(
        "openai_proxy",
        ["--host", "h", "--ports", "80,x", "--upstreams", "h", "--out", "o", "--max-requests-per-task", "1"],
    )
    assert result.returncode == 2 and "--ports" in result.stderr
    result = run_cli(
        "openai_proxy",
        ["--host", "h", "--ports", "80", "--upstreams", "h", "--out", "o", "--max-requests-per-task", "-1"],
    )
    assert result.returncode == 2 and "--max-requests-per-task" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("module", "env", "name"),
    [
        (
            "anthropic_proxy",
            {"OSW_ANTHROPIC_UPSTREAM_BASE": "http://127.0.0.1:1"},
            "OSW_ANTHROPIC_UPSTREAM_TOKEN",
        ),
        ("anthropic_proxy", {"OSW_ANTHROPIC_UPSTREAM_TOKEN": "x"}, "OSW_ANTHROPIC_UPSTREAM_BASE"),
        (
            "anthropic_proxy",
            {"OSW_ANTHROPIC_UPSTREAM_BASE": "ftp://h", "OSW_ANTHROPIC_UPSTREAM_TOKEN": "x"},
            "OSW_ANTHROPIC_UPSTREAM_BASE",
        ),
        ("gemini_proxy", {}, "OSW_GEMINI_UPSTREAM_TOKEN"),
        (
            "gemini_proxy",
            {"OSW_GEMINI_UPSTREAM_TOKEN": "x", "OSW_GEMINI_UPSTREAM_BASE": "http://"},
            "OSW_GEMINI_UPSTREAM_BASE",
        ),
    ],
)
def test_missing_or_bad_environment(tmp_path, module, env, name):
    out = tmp_path / "tokens.jsonl"
    result = run_cli(
        module, ["--host", "127.0.0.1", "--port", "1", "--out", str(out), "--max-requests-per-task", "3"], env
    )
    assert result.returncode == 2 and name in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert SECRET not in result.stderr and not out.exists()


def openai_gateway_args(port: int, upstream, log: Path, budget: int) -> list[str]:
    """The OpenAI gateway on loopback `port` in front of the stand-in upstream, logging to `log`."""
    return ["--host", "127.0.0.1", "--ports", str(port), "--upstreams", upstream.hostport, "--upstream-kind",
            "openai", "--upstream-scheme", "http", "--upstream-token", SECRET, "--out", str(log),
            "--max-requests-per-task", str(budget)]


async def test_missing_out_folder_is_created(tmp_path, upstream):
    log = tmp_path / "runs" / "single" / "gateway-tokens.jsonl"  # the README's one-task example, fresh checkout
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_gateway_process("openai_proxy", openai_gateway_args(port, upstream, log, budget=1))
    try:
        await asyncio.to_thread(wait_healthy, url, proc)
        statuses = [(await stream_request(url, "fresh")).status for _ in range(2)]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert statuses == [200, 402]
    assert [(r.task, r.outcome) for r in read_token_log(log)] == [("fresh", "success"), ("fresh", "refused_budget")]


async def stream_request(url: str, task: str) -> aiohttp.ClientResponse:
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            f"{url}/t/{task}/v1/responses",
            json={"model": "m", "input": "x", "stream": True},
            headers={"Authorization": f"Bearer {PLACEHOLDER}"},
        ) as r,
    ):
        await r.read()
        return r


async def test_kill_9_mid_stream_and_restart_on_the_same_log(tmp_path, upstream):
    log = tmp_path / "tokens.jsonl"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_gateway_process("openai_proxy", openai_gateway_args(port, upstream, log, budget=4))
    try:
        await asyncio.to_thread(wait_healthy, url, proc)
        for _ in range(2):
            assert (await stream_request(url, "k")).status == 200
        upstream.replies.push(TextReply("long " * 50, chunks=50, event_delay_sec=0.1))
        async with (
            aiohttp.ClientSession() as s,
            s.post(f"{url}/t/k/v1/responses", json={"model": "m", "input": "x", "stream": True}) as r,
        ):
            await r.content.readuntil(b"output_text.delta")
            proc.kill()  # SIGKILL while the third generation streams
            with pytest.raises(aiohttp.ClientPayloadError):
                await r.read()
        proc.wait(timeout=10)
        with log.open("ab") as f:
            f.write(b'{"time": 1, "task": "k", "outc')  # a torn last line, as a crash mid-write leaves it
        proc = start_gateway_process("openai_proxy", openai_gateway_args(port, upstream, log, budget=4))
        health = await asyncio.to_thread(wait_healthy, url, proc)
        assert health["tasks"] == 1
        async with aiohttp.ClientSession() as s, s.get(f"{url}/healthz", params={"task": "k"}) as r:
            assert (await r.json())["task"]["calls_used"] == 2
        statuses = [(await stream_request(url, "k")).status for _ in range(3)]
        assert statuses == [200, 200, 402]
    finally:
        proc.kill()
        proc.wait(timeout=10)
    rows = read_token_log(log)
    assert [(r.outcome, r.calls_used) for r in rows] == [
        ("success", 1),
        ("success", 2),
        ("success", 3),
        ("success", 4),
        ("refused_budget", 4),
    ]


async def test_no_credential_in_any_file_healthz_error_body_or_log(tmp_path, upstream):
    log = tmp_path / "tokens.jsonl"
    stderr = tmp_path / "gateway.stderr"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_gateway_process(
        "anthropic_proxy",
        [
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--out",
            str(log),
            "--max-requests-per-task",
            "2",
            "--rate-limit-max-wait",
            "0.5",
        ],
        {
            "OSW_ANTHROPIC_UPSTREAM_BASE": f"http://{upstream.hostport}",
            "OSW_ANTHROPIC_UPSTREAM_TOKEN": SECRET,
        },
        stderr,
    )
    bodies: list[bytes] = []
    try:
        bodies.append(repr(await asyncio.to_thread(wait_healthy, url, proc)).encode())
        upstream.replies.push(HttpFault(500), HttpFault(429, retry_after="2"), TextReply(), TextReply())
        msg = {"model": "m", "max_tokens": 5, "messages": []}
        async with aiohttp.ClientSession() as s:
            for path, data in [("/t/x/v1/messages", msg)] * 5 + [("/t/x/v1/messages/count_tokens", msg)]:
                async with s.post(url + path, json=data, headers={"X-Api-Key": PLACEHOLDER}) as r:
                    bodies.append(await r.read() + repr(r.headers).encode())
            async with s.post(f"{url}/t/x/v1/messages", data=b"{bad") as r:
                bodies.append(await r.read())
            async with s.get(f"{url}/healthz", params={"task": "x"}) as r:
                bodies.append(await r.read())
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert [r.outcome for r in read_token_log(log)] == [
        "failed",
        "rate_limited",
        "success",
        "success",
        "refused_budget",
        "free",
        "invalid_request",
    ]
    assert all(r.headers["x-api-key"] == SECRET for r in upstream.state.requests)
    assert "rate-limited" in stderr.read_text()  # the wait was logged ...
    for blob in [log.read_bytes(), stderr.read_bytes(), *bodies]:
        assert SECRET.encode() not in blob  # ... and the credential never was


async def test_several_ports_share_one_state(tmp_path, upstream):
    ports = [free_port(), free_port()]
    args = [
        "--host",
        "127.0.0.1",
        "--ports",
        f"{ports[0]},{ports[1]}",
        "--upstreams",
        upstream.hostport,
        "--upstream-kind",
        "openai",
        "--upstream-scheme",
        "http",
        "--upstream-token",
        SECRET,
        "--out",
        str(tmp_path / "tokens.jsonl"),
        "--max-requests-per-task",
        "2",
    ]
    proc = start_gateway_process("openai_proxy", args)
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    try:
        for url in urls:
            await asyncio.to_thread(wait_healthy, url, proc)
        statuses = [(await stream_request(url, "shared")).status for url in (*urls, urls[1])]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert statuses == [200, 200, 402]


def openai_process_args(port: int, upstream_hostport: str, log: Path, *extra: str) -> list[str]:
    return ["--host", "127.0.0.1", "--ports", str(port), "--upstreams", upstream_hostport, "--upstream-kind",
            "openai", "--upstream-scheme", "http", "--out", str(log), "--max-requests-per-task", "5", *extra]


async def test_the_openai_token_comes_from_the_environment_and_the_flag_warns(tmp_path, upstream):
    port, stderr = free_port(), tmp_path / "stderr.log"
    url = f"http://127.0.0.1:{port}"
    proc = start_gateway_process("openai_proxy", openai_process_args(port, upstream.hostport, tmp_path / "t.jsonl"),
                                 {"OSW_OPENAI_UPSTREAM_TOKEN": SECRET}, stderr)
    try:
        await asyncio.to_thread(wait_healthy, url, proc)
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        assert (await stream_request(url, "env")).status == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert upstream.state.requests[-1].headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET.encode() not in cmdline, "the token is not on the command line"
    assert "visible" not in stderr.read_text()
    port = free_port()
    proc = start_gateway_process(
        "openai_proxy", openai_process_args(port, upstream.hostport, tmp_path / "t2.jsonl", "--upstream-token", SECRET),
        {"OSW_OPENAI_UPSTREAM_TOKEN": ""}, stderr)
    try:
        await asyncio.to_thread(wait_healthy, f"http://127.0.0.1:{port}", proc)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    warning = [line for line in stderr.read_text().splitlines() if "--upstream-token" in line]
    assert len(warning) == 1 and "visible to every local user" in warning[0]
    assert "OSW_OPENAI_UPSTREAM_TOKEN" in warning[0]
    assert SECRET not in stderr.read_text()


async def test_upstream_idle_timeout_is_a_flag(tmp_path, upstream):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "t.jsonl"
    upstream.replies.push(Hang())
    proc = start_gateway_process("openai_proxy", openai_process_args(port, upstream.hostport, log,
                                                                     "--upstream-idle-timeout", "0.5"),
                                 {"OSW_OPENAI_UPSTREAM_TOKEN": SECRET})
    try:
        await asyncio.to_thread(wait_healthy, url, proc)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as s, s.post(
            f"{url}/t/h/v1/responses", json={"model": "m"}
        ) as r:
            assert r.status == 504
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert [(r.outcome, r.status) for r in read_token_log(log)] == [("failed", 504)]


async def test_scope_key_file_flag(tmp_path, upstream):
    key_file = tmp_path / "run" / "scope.key"
    log, stderr = tmp_path / "t.jsonl", tmp_path / "stderr.log"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_gateway_process("openai_proxy", openai_process_args(port, upstream.hostport, log,
                                                                     "--scope-key-file", str(key_file)),
                                 {"OSW_OPENAI_UPSTREAM_TOKEN": SECRET}, stderr)
    try:
        health = await asyncio.to_thread(wait_healthy, url, proc)
        key = load_or_create_key(key_file)  # the gateway created it
        secret = scope_secret(key, "k.a1")
        async with aiohttp.ClientSession() as s:
            for credential, status in ((secret, 200), (PLACEHOLDER, 403)):
                async with s.post(f"{url}/t/k.a1/v1/responses", json={"model": "m"},
                                  headers={"Authorization": f"Bearer {credential}"}) as r:
                    assert r.status == status
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert health["scope_secrets"] is True and health["scope_key_id"] == key_id(key)
    for blob in (stderr.read_text(), log.read_text()):
        assert secret not in blob and key.hex() not in blob
    key_file.write_text("garbage\n")
    result = run_cli("openai_proxy", openai_args(tmp_path / "t3.jsonl", "--upstreams", "h", "--scope-key-file",
                                                 str(key_file)), {"OSW_OPENAI_UPSTREAM_TOKEN": "x"})
    assert (result.returncode, result.stderr.count("\n")) == (2, 1) and "--scope-key-file" in result.stderr
