"""The run over its time (view/timeline.py), from queue events and token-log rows written here: running attempts
and the limit as steps, tokens and waits per minute worked out by hand (a wait spread over the minutes it covers),
the attempts that gave no valid result apart, the files read as they grow, and the quota line's three sources."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from hcu.osworld.records.manifest import Manifest
from hcu.osworld.run_config import RunConfig
from hcu.osworld.summary.waste import ValidResults
from hcu.osworld.view.data import RunData
from hcu.osworld.view.index_page import render_index
from hcu.osworld.view.links import ServedLinks
from hcu.osworld.view.svg import Linear, polyline_points
from hcu.osworld.view.timeline import MAX_BINS, RunTimeline, quota_line

T0 = 1_779_999_980.0
"""20 s into a minute of the clock (bins are whole minutes of the clock): minutes start at -20, 40, 100, ... s."""


def event(at: float, kind: str, **more: object) -> dict:
    return {"at": T0 + at, "event": kind, **more}


def row(scope: str, end: float, *, tokens: int = 0, cached: int = 0, wait: float = 0.0, latency: float = 1.0,
        provider: str = "openai") -> dict:
    return {"time": T0 + end, "task": scope, "provider": provider, "model": "m", "path": "/v1/x", "status": 200,
            "outcome": "success", "counted": True, "calls_used": 1,
            "usage": {"input_tokens": tokens, "cached_input_tokens": cached, "output_tokens": 0},
            "latency_sec": latency, "rate_limit_wait_sec": wait}


def write(path: Path, records: list[dict], mode: str = "wb") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open(mode) as f:
        f.write(b"".join(orjson.dumps(r) + b"\n" for r in records))


@dataclass
class Graded:
    key: str
    valid: bool
    ran: bool = True


def results(valid: list[str], withheld: tuple[str, ...] = (), set_aside: tuple[str, ...] = ()) -> ValidResults:
    """Tasks a and b of run r: the repeats in `valid` gave a valid result, those in `withheld` a result without one,
    the others none yet."""
    graded = [Graded(key, True) for key in valid] + [Graded(key, False) for key in withheld]
    return ValidResults.of("r", ["a", "b"], graded + [Graded("b", False, ran=False)], set_aside)


RESULTS = results([])


def test_running_attempts_and_the_limit_step_at_the_queue_events(tmp_path: Path) -> None:
    write(tmp_path / "logs" / "queue.jsonl", [
        event(0, "start"), event(0, "limit", limit=2), event(1, "launch"), event(2, "launch"), event(30, "exit"),
        event(31, "set_aside"), event(40, "stop"),  # the queue went away with one attempt running
        event(100, "start"), event(100, "adopt"), event(101, "limit", limit=3), event(150, "exit"),
        event(160, "held"), event(170, "done")])
    t = RunTimeline(tmp_path, None, "r", "openai").timeline(RESULTS)
    assert t is not None and t.span == 170 and not t.has_token_log
    assert t.running == [(0, 0), (1, 1), (2, 2), (30, 1), (100, 0), (100, 1), (150, 0)]
    assert t.limit == [(0, 2), (101, 3)]
    assert t.events == {"start": 2, "launch": 2, "adopt": 1, "exit": 2, "limit": 2}


def test_tokens_and_waits_per_minute_by_hand(tmp_path: Path) -> None:
    log = tmp_path / "gateway-tokens.jsonl"
    write(log, [
        row("r.a.a1", 10, tokens=600),                       # ends in minute [-20, 40)
        row("r.a.a1", 50, tokens=300, wait=90, latency=95),  # [40, 100); began at -45, waited -45..45
        row("r.b.a1", 100, tokens=1200, cached=200),         # [100, 160); OpenAI counts the cached part too
        row("r.b.a1", 111, wait=30, latency=31),             # began at 80, waited 80..110
        row("other.a.a1", 20, tokens=99_999, wait=50)])      # another run's
    t = RunTimeline(tmp_path, log, "r", "openai").timeline(results(["a"], withheld=("b",)))
    assert t is not None
    # from the first request's start (-45 s) to the last's end (111 s): the minutes from -80, -20, 40 and 100
    assert (t.start, t.span, t.bin_minutes) == (T0 - 45, 156, 1)
    assert [x for x, _ in t.tokens] == [0, 25, 85, 145], "each bin at its start, the first at the run's start"
    assert [v for _, v in t.tokens] == [0, 600, 300, 1200]
    assert [v for _, v in t.tokens_wasted] == [0, 0, 0, 1200], "b gave no valid result"
    # a waited 25 s of [-80, -20), 60 of [-20, 40), 5 of [40, 100); b 20 of [40, 100) and 10 of [100, 160)
    assert [round(v * 60, 6) for _, v in t.waiting] == [25, 60, 25, 10]
    assert [round(v * 60, 6) for _, v in t.waiting_wasted] == [0, 0, 20, 10]
    assert (t.requests, t.token_total, t.token_wasted, t.wait_sec, t.wait_wasted_sec) == (4, 2100, 1200, 120, 30)


def test_anthropic_tokens_leave_cache_reads_out(tmp_path: Path) -> None:
    log = tmp_path / "gateway-tokens.jsonl"
    write(log, [row("r.a.a1", 10, tokens=1000, cached=800, provider="anthropic")])
    t = RunTimeline(tmp_path, log, "r", "anthropic").timeline(results(["a"]))
    assert t is not None and t.token_total == 200


def test_a_set_aside_attempt_gave_no_valid_result_and_one_without_a_result_none_yet(tmp_path: Path) -> None:
    log = tmp_path / "gateway-tokens.jsonl"
    write(log, [row("r.a.a1", 10, tokens=100), row("r.a.a2", 20, tokens=10)])
    timeline = RunTimeline(tmp_path, log, "r", "openai")
    assert timeline.timeline(results(["a"], set_aside=("a-1",))).token_wasted == 100, "a-2 is valid"
    still_running = timeline.timeline(results([], set_aside=("a-1",)))
    assert (still_running.token_total, still_running.token_wasted) == (110, 100), "a-2 has not ended: neither"
    assert timeline.timeline(results([], withheld=("a",), set_aside=("a-1",))).token_wasted == 110


def test_the_files_are_read_as_they_grow_and_again_when_replaced(tmp_path: Path) -> None:
    log, queue = tmp_path / "gateway-tokens.jsonl", tmp_path / "logs" / "queue.jsonl"
    write(log, [row("r.a.a1", 10, tokens=100)])
    write(queue, [event(0, "start"), event(1, "launch")])
    timeline = RunTimeline(tmp_path, log, "r", "openai")
    first = timeline.timeline(results(["a"]))
    assert timeline.timeline(results(["a"])) is first, "nothing changed: the series are kept"
    write(log, [row("r.a.a1", 130, tokens=50)], "ab")
    with queue.open("ab") as f:
        f.write(orjson.dumps(event(140, "exit")) + b"\n" + b'{"at": 1, "event": "lau')  # a line still being written
    grown = timeline.timeline(results(["a"]))
    assert grown is not None and grown.token_total == 150 and grown.running[-1] == (140, 0)
    assert timeline.timeline(results([], withheld=("a",))).token_wasted == 150, "a result withheld: drawn again"
    log.unlink()
    write(log, [row("r.a.a1", 5, tokens=7)])  # another file at the path: read from its start
    assert timeline.timeline(results(["a"])).token_total == 7


def test_a_long_run_is_binned_in_wider_bins(tmp_path: Path) -> None:
    log = tmp_path / "gateway-tokens.jsonl"
    minutes = 3 * MAX_BINS + 5
    write(log, [row("r.a.a1", 0, tokens=6), row("r.a.a1", 60 * minutes, tokens=6)])
    t = RunTimeline(tmp_path, log, "r", "openai").timeline(results(["a"]))
    assert t is not None and t.bin_minutes == 4 and len(t.tokens) <= MAX_BINS
    assert t.tokens[0][1] == 6 / 4, "tokens per minute: the bin's tokens over its minutes"


def test_nothing_to_draw_is_said(tmp_path: Path) -> None:
    assert RunTimeline(tmp_path, None, "r", "openai").timeline(RESULTS) is None


def test_a_step_series_is_held_to_the_end_of_the_span() -> None:
    x, y = Linear(0, 100, 0, 100), Linear(0, 10, 100, 0)
    assert polyline_points([(0, 1), (50, 2)], x, y, step=True, until=100) == "M0 90H50V80H100"
    assert polyline_points([(0, 1), (50, 2)], x, y, until=100) == "M0 90L50 80", "a rate is not held"


BODY = {"upstreams": ["h1@d1", "h1@d2"], "upstream_limits": {
    "h1@d1": {"tokens": {"limit": 30000, "remaining": 100}, "seen_at": 1.0},
    "h1@d2": {"requests": {"limit": 10}, "seen_at": 1.0}, "h2": None}}


def manifest_of(*answers: dict) -> Manifest:
    """A manifest whose starts recorded these /healthz answers of the gateway."""
    return Manifest.model_validate({
        "run_id": "r", "config_sha256": "0" * 64, "task_files": {}, "osworld_revision": {"code": {}, "tasks_dir": None},
        "guest_image": {"container_image": "hcu-test-desktop:latest"},
        "artifacts": {"agents_json": None, "agent": {}, "computer_use": {"path": None},
                      "instructions_file": {"path": None}, "base_instructions_file": {"path": None}},
        "starts": [{"at": 1.0, "host": "h", "hcu_commit": {"path": "/hcu"}, "gateway_health": answer}
                   for answer in answers]})


def config_with(**keys: object) -> RunConfig:
    return RunConfig.model_validate({"agent": "codex", "test_desktop": True, "tasks": ["a"], **keys})


@pytest.mark.parametrize("config, manifest, tpm, said", [
    (config_with(quota={"openai": {"tpm": 100000}}), None, 100000, "tpm of openai in the config's quota"),
    (config_with(quota={"h1@d1": {"tpm": 40000}, "h1@d2": {"tpm": 20000}, "openai": {"rpm": 9}}),
     manifest_of({"body": BODY}), 60000, "tpm of h1@d1 + h1@d2 in the config's quota"),
    (config_with(quota={"openai": {"rpm": 60}}), manifest_of({"body": BODY}), 30000,
     "the sum of the token limits h1@d1 stated, as manifest.json recorded"),
    (config_with(), manifest_of({"per_node": "each Ray node"}), None,
     "no quota line: the config gives no tokens-per-minute quota"),
])
def test_the_quota_line_is_the_configs_else_the_limits_observed_else_none(config: RunConfig,
                                                                         manifest: Manifest | None,
                                                                         tpm: int | None, said: str) -> None:
    line = quota_line(config, manifest)
    assert line.tpm == tpm and said in line.detail
    assert line.name == ("" if tpm is None else f"{'quota' if 'config' in said else 'observed limit'} {tpm:,} tpm")


def test_the_run_page_says_why_a_panel_is_missing(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    write(run_dir / "logs" / "queue.jsonl", [event(0, "start"), event(1, "launch")])
    (run_dir / "config.json").write_bytes(orjson.dumps({"run_id": "r", "agent": "codex", "tasks": ["a"]}))
    page = render_index(RunData(run_dir), ServedLinks())
    assert 'id="chart-quota-attempts"' in page and 'id="chart-quota-tokens"' not in page
    assert "No token log (gateway-tokens.jsonl): tokens per minute are unknown." in page
    assert "no token log: the rate-limit waits are unknown" in page
    write(run_dir / "gateway-tokens.jsonl", [row("r.a.a1", 10, tokens=5)])
    page = render_index(RunData(run_dir), ServedLinks())
    assert 'id="chart-quota-tokens"' in page and "No quota line: the config gives no tokens-per-minute quota" in page
    empty = tmp_path / "e"
    (empty / "tasks").mkdir(parents=True)
    assert "nothing to draw over its time" in render_index(RunData(empty), ServedLinks())
