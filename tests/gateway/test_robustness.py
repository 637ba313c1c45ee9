"""Robustness: bounded client connections, request bodies forwarded as sent and
bounded, large events, a brief upstream outage absorbed, no state for scopes that never generate."""

from __future__ import annotations

import asyncio
import gzip
import zlib

import aiohttp
import orjson
from aiohttp import web

from hcu.scripted.replies import TextReply
from hcu.scripted.upstream import build_app as build_upstream_app

from .conftest import ManualClock, free_port, until


async def closed_by_server(reader: asyncio.StreamReader, wait_sec: float = 20.0) -> bool:
    """True when the server closes the connection (EOF or reset) within `wait_sec`; False if it stays open."""
    try:
        while await asyncio.wait_for(reader.read(65536), wait_sec):
            pass
    except asyncio.TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


async def connect(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = url.removeprefix("http://").split(":")
    return await asyncio.open_connection(host, int(port))


async def test_silent_slow_and_idle_connections_are_closed(upstream, make_gateway):
    gw = await make_gateway("openai", header_timeout_sec=0.5)
    silent, _ = await connect(gw.url)
    assert await closed_by_server(silent), "a connection that never sends a request is closed"

    slow, writer = await connect(gw.url)

    async def trickle() -> None:
        try:
            for byte in b"POST /t/s/v1/responses HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 400:
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(0.05)
        except ConnectionError:
            pass

    sender = asyncio.create_task(trickle())
    assert await closed_by_server(slow), "a header sent byte by byte does not hold the connection"
    sender.cancel()

    idle, writer = await connect(gw.url)
    body = b'{"model": "m", "input": "x"}'
    writer.write(b"POST /t/k/v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    await writer.drain()
    assert (await idle.readuntil(b"\r\n")).startswith(b"HTTP/1.1 200")
    assert await closed_by_server(idle), "an idle keep-alive connection is closed"
    assert [r.outcome for r in gw.rows()] == ["success"]


async def test_connections_per_peer_are_capped(upstream, make_gateway):
    gw = await make_gateway("openai", max_connections_per_peer=3, header_timeout_sec=60)
    held = [await connect(gw.url) for _ in range(3)]
    extra, _ = await connect(gw.url)
    assert await closed_by_server(extra, wait_sec=10), "a fourth connection from the same peer is closed at once"
    reader, writer = held[1]
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await reader.readuntil(b"\r\n")).startswith(b"HTTP/1.1 200"), "the first three stay open"
    held[0][1].close()

    async def served() -> bool:
        try:
            async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/c/v1/responses", json={"model": "m"}) as r:
                return r.status == 200
        except aiohttp.ClientConnectionError:  # the closed connection is not counted off yet
            return False

    for _ in range(500):
        if await served():
            break
    else:
        raise AssertionError("a slot freed by a closed connection is never used again")
    for _, writer in held[1:]:
        writer.close()


async def test_a_compressed_body_goes_upstream_as_the_bytes_the_gateway_checked(upstream, make_gateway):
    gw = await make_gateway("openai")
    body = orjson.dumps({"model": "m", "input": "compressed " * 100})
    for packed, encoding in ((gzip.compress(body), "gzip"), (zlib.compress(body), "deflate")):
        async with aiohttp.ClientSession() as s, s.post(
            f"{gw.url}/t/z/v1/responses", data=packed,
            headers={"Content-Encoding": encoding, "Content-Type": "application/json"},
        ) as r:
            assert r.status == 200, await r.text()
    for seen in upstream.state.requests:
        assert "content-encoding" not in seen.headers and seen.raw_body == body
        assert seen.headers["content-length"] == str(len(body))
    assert [r.model for r in gw.rows()] == ["m", "m"], "the gateway read the model from the decoded body"


async def test_a_gzip_bomb_and_unknown_encodings_are_refused(upstream, make_gateway):
    gw = await make_gateway("anthropic")
    deflater = zlib.compressobj(wbits=31)
    bomb = deflater.compress(b'{"model": "m", "max_tokens": 5, "messages": [], "pad": "')
    bomb += b"".join(deflater.compress(b"0" * (1 << 20)) for _ in range(100))  # 100 MB inflated
    bomb += deflater.compress(b'"}') + deflater.flush()
    assert len(bomb) < 200 * 1024
    async with aiohttp.ClientSession() as s:
        for data, encoding, status in ((bomb, "gzip", 413), (b"{}", "br", 415), (b"{}", "zstd", 415)):
            async with s.post(f"{gw.url}/t/b/v1/messages", data=data,
                              headers={"Content-Encoding": encoding, "Content-Type": "application/json"}) as r:
                assert r.status == status, encoding
                assert (await r.json())["type"] == "error"
    assert upstream.state.requests == []
    assert {r.outcome for r in gw.rows()} == {"invalid_request"}


async def test_the_body_limit_fits_a_screenshot_heavy_request(upstream, make_gateway):
    gw = await make_gateway("openai")
    image = "data:image/png;base64," + "A" * (60 * 1024 * 1024)
    body = orjson.dumps({"model": "m", "input": [{"role": "user", "content": [
        {"type": "input_image", "image_url": image}]}]})
    del image
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{gw.url}/t/big/v1/responses", data=body,
                          headers={"Content-Type": "application/json"}) as r:
            assert r.status == 200
        too_big = body + b" " * (5 * 1024 * 1024)
        async with s.post(f"{gw.url}/t/big/v1/responses", data=too_big,
                          headers={"Content-Type": "application/json"}) as r:
            assert r.status == 413 and (await r.json())["error"]["code"] == "request_too_large"
    assert len(upstream.state.requests) == 1
    upstream.state.requests.clear()  # the 60 MB body


async def test_one_large_event_passes_whole(upstream, make_gateway):
    gw = await make_gateway("openai")
    text = "x" * (4 * 1024 * 1024)
    upstream.replies.push(TextReply(text, chunks=1), TextReply(text, chunks=1))
    body = {"model": "m", "input": "x", "stream": True}
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{gw.url}/t/l/v1/responses", json=body) as r:
            through = await r.read()
        async with s.post(f"http://{upstream.hostport}/v1/responses", json=body) as r:
            direct = await r.read()
    assert through.count(text.encode()) == direct.count(text.encode()) > 1
    assert len(through) == len(direct) and gw.rows()[0].outcome == "success"


async def test_a_brief_upstream_outage_is_retried_before_it_counts(make_gateway):
    port = free_port()
    clock = ManualClock()
    clock.gate = asyncio.Event()  # the gateway's wait before its second try lasts until the upstream is up
    gw = await make_gateway("openai", upstreams=f"127.0.0.1:{port}", clock=clock)
    runner = web.AppRunner(build_upstream_app())

    async def come_up_late() -> None:
        await until(lambda: clock.sleeps, "the gateway's first try to find nothing listening")
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        clock.gate.set()

    late = asyncio.create_task(come_up_late())
    try:
        async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/blip/v1/responses", json={"model": "m"}) as r:
            assert r.status == 200
    finally:
        await late
        await runner.cleanup()
    (row,) = gw.rows()
    assert (row.outcome, row.attempts) == ("success", 2)
    assert (await gw.task_view("blip"))["failed_in_a_row"] == 0


async def test_scopes_that_never_generate_hold_no_state(upstream, make_gateway):
    gw = await make_gateway("anthropic")
    async with aiohttp.ClientSession() as s:
        for i in range(40):
            count = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
            async with s.post(f"{gw.url}/t/scope{i}/v1/messages/count_tokens", json=count) as r:
                assert r.status == 200
            async with s.post(f"{gw.url}/t/scope{i}/v1/files", json={}) as r:
                assert r.status == 404
            async with s.post(f"{gw.url}/t/scope{i}/v1/messages", data=b"{bad") as r:
                assert r.status == 400
        async with s.post(f"{gw.url}/t/gen/v1/messages", json={"model": "m", "max_tokens": 5, "messages": []}) as r:
            assert r.status == 200
    assert (await gw.health())["tasks"] == 1
    assert len(gw.rows()) == 121, "every call still has its row"
