"""computer-use's call log on its own (no desktop needed): records, the size cap and what it drops, and the
recorder's promise that a call's result and error pass through untouched."""

from __future__ import annotations

import anyio
import orjson
import pytest
from mcp import types
from mcp.server.mcpserver.exceptions import ToolError

from hcu.computer_use.call_log import (
    CALLS_FILE,
    DROP_MARGIN_BYTES,
    ENV_CAP,
    ENV_DIR,
    SIZE_CAP,
    TEXT_LIMIT,
    CallLog,
    open_from_env,
)
from hcu.computer_use.recorder import Recorder, call_record


def lines(folder) -> list[dict]:
    return [orjson.loads(line) for line in (folder / CALLS_FILE).read_bytes().splitlines()]


def test_a_process_starts_with_what_earlier_turns_left(tmp_path):
    first = CallLog(tmp_path, cap_bytes=10_000)
    assert first.write_shot(first.next_seq(), b"\xff\xd8\xff" + b"x" * 500) is not None
    second = CallLog(tmp_path, cap_bytes=10_000)
    starts = [r for r in lines(tmp_path) if r["kind"] == "start"]
    assert [s["process"] for s in starts] == [first.process, second.process] and first.process != second.process
    assert starts[1]["used_bytes"] == first.used, "the cap is the attempt's, across the CLI's server processes"


def test_the_cap_drops_shots_then_details_and_says_so(tmp_path):
    log = CallLog(tmp_path, cap_bytes=3_000)
    shot = b"\xff\xd8\xff" + b"x" * 1_000
    kept = [log.write_shot(log.next_seq(), shot) for _ in range(4)]
    assert kept[:2] == [f"shots/{log.process}-00001.jpg", f"shots/{log.process}-00002.jpg"] and kept[2:] == [None, None]
    big = call_record(log.process, log.next_seq(), "type", {"text": "y" * 5_000}, 0.0,
                      types.CallToolResult(content=[types.TextContent(type="text", text="typed")]), None)
    log.write_call(big)
    call = [r for r in lines(tmp_path) if r["kind"] == "call"][-1]
    assert (call["tool"], call["arguments"], call["result"], call["dropped"]) == ("type", None, None, SIZE_CAP)
    assert log.used <= log.cap_bytes + DROP_MARGIN_BYTES
    sizes = sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file())
    assert sizes == log.used, "the cap counts every byte the folder holds"


def test_text_is_clipped_and_the_cut_counted(tmp_path):
    result = types.CallToolResult(content=[types.TextContent(type="text", text="r" * (TEXT_LIMIT + 7)),
                                           types.ImageContent(type="image", data="aGVsbG8=", mime_type="image/png")])
    record = call_record("p", 1, "observe", {"element": "e" * (TEXT_LIMIT + 3), "max_nodes": 5}, 1.0, result, None)
    assert len(record.result) == TEXT_LIMIT and len(record.arguments["element"]) == TEXT_LIMIT
    assert record.clipped_chars == 10 and record.arguments["max_nodes"] == 5
    assert record.images == ["image/png 5"]
    failed = call_record("p", 2, "click", {"x": 1}, 1.0, None, ToolError("point (1, 0) is outside"))
    assert failed.error and failed.result == "point (1, 0) is outside"


def test_the_recorder_returns_and_raises_exactly_what_the_call_did(tmp_path):
    recorder = Recorder(CallLog(tmp_path))
    answer = types.CallToolResult(content=[types.TextContent(type="text", text="waited 1 s")])

    async def ok() -> types.CallToolResult:
        return answer

    async def refused() -> types.CallToolResult:
        raise ToolError("wait: unknown argument 'secs'")

    async def run() -> None:
        assert await recorder.around("wait", {"seconds": 1}, ok) is answer
        with pytest.raises(ToolError) as raised:
            await recorder.around("wait", {"secs": 1}, refused)
        assert str(raised.value) == "wait: unknown argument 'secs'"

    anyio.run(run)
    kinds = [(r["kind"], r.get("seq"), r.get("error")) for r in lines(tmp_path)]
    assert kinds == [("start", None, None), ("begin", 1, None), ("call", 1, False), ("begin", 2, None),
                     ("call", 2, True)]


def test_the_call_log_is_off_unless_asked_for_and_never_blocks_the_server(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_DIR, raising=False)
    assert open_from_env() is None
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(ENV_DIR, str(blocker / "evidence"))
    assert open_from_env() is None, "an unusable folder turns recording off, the tools still serve"
    monkeypatch.setenv(ENV_DIR, str(tmp_path / "evidence"))
    monkeypatch.setenv(ENV_CAP, "5000")
    log = open_from_env()
    assert log is not None and log.cap_bytes == 5000
