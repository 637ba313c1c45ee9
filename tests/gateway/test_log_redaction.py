"""aiohttp's own error logging through the gateway: a request it cannot parse is logged, but neither a scope
secret nor the upstream credential in the bytes a guest sent reaches stderr."""

from __future__ import annotations

import asyncio
import logging

from hcu.gateway.log_redaction import REDACTOR
from hcu.gateway.scope_secret import load_or_create_key, scope_secret

from .conftest import SECRET, free_port, start_gateway_process, wait_healthy
from .test_robustness import closed_by_server, connect


def malformed_requests(secret: str) -> list[bytes]:
    head = b"POST /t/s.a1/v1/messages HTTP/1.1\r\nHost: x\r\n"
    return [
        head + f"Authorization: Bearer {secret}\x01\r\n\r\n".encode(),  # a bad character in the value
        head + f"X-Api-Key: {secret}".encode() + b"z" * 9000 + b"\r\n\r\n",  # a line too long
        head + f"Authori\x01zation {secret}\r\n\r\n".encode(),  # a bad header name
        f"GET /t/{secret}\x00 HTTP/1.1\r\nHost: x\r\n\r\n".encode(),  # a bad request target
        head + f"X-Echo: {SECRET}\x01\r\n\r\n".encode(),  # the real credential, guessed or echoed
    ]


async def test_unparseable_requests_leave_no_secret_in_stderr(tmp_path, upstream):
    key_file, stderr = tmp_path / "scope.key", tmp_path / "stderr.log"
    secret = scope_secret(load_or_create_key(key_file), "s.a1")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_gateway_process(
        "anthropic_proxy",
        ["--host", "127.0.0.1", "--port", str(port), "--out", str(tmp_path / "t.jsonl"),
         "--max-requests-per-task", "3", "--scope-key-file", str(key_file)],
        {"OSW_ANTHROPIC_UPSTREAM_BASE": f"http://{upstream.hostport}", "OSW_ANTHROPIC_UPSTREAM_TOKEN": SECRET},
        stderr,
    )
    try:
        await asyncio.to_thread(wait_healthy, url, proc)
        for request in malformed_requests(secret):
            reader, writer = await connect(url)
            writer.write(request)
            await writer.drain()
            assert await closed_by_server(reader)
            writer.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    logged = stderr.read_text()
    assert logged.count("Error handling request") == len(malformed_requests(secret)), logged[-2000:]
    assert secret not in logged and secret[5:21] not in logged and SECRET not in logged


async def test_a_gateway_rewrites_aiohttp_records_message_and_traceback(make_gateway, caplog):
    await make_gateway("openai")
    caplog.set_level(logging.INFO, "aiohttp.server")
    secret = "hcu1-" + "ab" * 32
    try:
        raise ValueError(f"bad line b'Authorization: Bearer {secret}\\x01'")
    except ValueError:
        logging.getLogger("aiohttp.server").exception("Error handling request from %s (%s)", "10.0.0.2", secret)
    assert REDACTOR in logging.getLogger("aiohttp.server").filters
    assert "Error handling request from 10.0.0.2" in caplog.text and "ValueError" in caplog.text
    assert secret not in caplog.text and "ab" * 16 not in caplog.text
    logging.getLogger("hcu.gateway").warning("upstream echoed %s", SECRET)
    assert SECRET not in caplog.text, "the credential in use is hidden too"
