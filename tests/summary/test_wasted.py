"""Quota spent on attempts that gave no valid result, and the rate-limit waits, on a run directory built here with
known token-log rows: every figure worked out by hand from the rows and results written below. Unknown is None
with why, never 0; a summary.json from before these keys still reads, and summary.md then has no line for them."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from hcu.gateway.tokenlog import TORN_LINE_END, TokenLogRow, TokenUsage
from hcu.osworld.summary.model import parse_summary
from hcu.osworld.summary.report import render_markdown
from hcu.osworld.summary.run_summary import load_run, summarize
from tests.summary.conftest import make_repeat_run, ok

PRICES = {"gpt-5.5": {"input_usd_per_mtok": 1, "cached_input_usd_per_mtok": 0.1, "output_usd_per_mtok": 4}}
DATA = Path(__file__).parent / "data"


def usage(calls: int) -> dict:
    """`calls` generations of 1,000 input (250 cached) and 100 output tokens each, all accounted."""
    return {"model_calls": calls, "requests": calls, "input_tokens": 1000 * calls, "cached_input_tokens": 250 * calls,
            "output_tokens": 100 * calls, "reasoning_tokens": 10 * calls, "fully_accounted": True}


def line(scope: str, *, waited: float = 0.0, counted: bool = True, at: float = 1_780_000_000.0) -> bytes:
    """One request as the gateway logs it: a counted generation of 1,000 in / 100 out, or a 429 it gave up on."""
    row = TokenLogRow(time=at, task=scope, provider="openai", model="gpt-5.5", path="/v1/responses",
                      status=200 if counted else 429, outcome="success" if counted else "rate_limited",
                      counted=counted, calls_used=1,
                      usage=TokenUsage(input_tokens=1000, cached_input_tokens=250, output_tokens=100,
                                       reasoning_tokens=10) if counted else None,
                      latency_sec=1.0 + waited, rate_limit_wait_sec=waited)
    return orjson.dumps(row.model_dump()) + b"\n"


def build(root: Path, *, b_cost: float | None = 0.75, token_log: bool = True) -> Path:
    """a: scored 1.0 on attempt 2 (attempt 1 set aside: the guest died); b: withheld (the evaluator raised);
    c: scored 0."""
    b = {"status": "evaluator_error", "failure_classification": "evaluator", "usage": usage(4), "duration_sec": 80.0}
    run_dir = make_repeat_run(root, "w", {
        "a": [ok(1.0, usage=usage(3), cost_usd=0.5, duration_sec=100.0)],
        "b": [b | ({"cost_usd": b_cost} if b_cost is not None else {})],
        "c": [ok(0.0, usage=usage(2), cost_usd=0.125, duration_sec=60.0)]},
        retries={"a": [{"status": "error", "failure_classification": "guest", "usage": usage(2), "cost_usd": 0.25,
                        "duration_sec": 50.0}]}, prices=PRICES)
    if token_log:
        (run_dir / "gateway-tokens.jsonl").write_bytes(b"".join([
            line("w.a.a1"), line("w.a.a1", waited=30.0), line("w.a.a1", waited=5.0, counted=False),  # set aside
            line("w.a.a2", waited=10.0), line("w.a.a2"), line("w.a.a2"),                           # valid
            *[line("w.b.a1", waited=5.0) for _ in range(4)],                                        # withheld
            line("w.c.a1"), line("w.c.a1"),                                                         # valid
            line("other-run.a.a1", waited=100.0), line("w.zz.a1", waited=100.0),  # another run's; no task of w
            b'{"time": 1.0, "task": "w.b.a1", "rate_limit_wait_sec": 9' + TORN_LINE_END]))
    return run_dir


def test_what_attempts_without_a_valid_result_spent_by_hand(tmp_path: Path) -> None:
    run_dir = build(tmp_path)
    s = summarize(run_dir)
    wasted = s["wasted"]
    # set aside a-1 (2 calls) and withheld b (4 calls); the run: a 3, b 4, c 2 in tasks/ and 2 set aside
    assert (wasted["attempts"], wasted["set_aside"], wasted["withheld"]) == (2, 1, 1)
    assert wasted["model_calls"] == 6 and wasted["share_of_model_calls"] == pytest.approx(6 / 11)
    assert (wasted["input_tokens"], wasted["cached_input_tokens"], wasted["output_tokens"]) == (6000, 1500, 600)
    assert wasted["total"] == 6600 and wasted["accounted_attempts"] == 2
    assert wasted["share_of_tokens"] == pytest.approx(6600 / 12100)
    assert wasted["cost_usd"] == 1.0 and wasted["cost_unknown"] == ""
    assert wasted["share_of_cost"] == pytest.approx(1.0 / 1.625) and s["cost_usd"] == 1.625
    assert wasted["machine_sec"] == 130.0
    assert s["retried"]["cost_usd"] == 0.25 and s["retried"]["total"] == 2200, "retried stays what it was"
    # waits: a-1 30 + 5, a-2 10, b 4 x 5; another run's rows and the torn line are not the run's
    assert s["rate_limit_waits"] == {"wait_sec": 65.0, "without_valid_result_sec": 55.0, "requests": 12,
                                     "requests_waited": 7, "unknown": ""}
    md = (run_dir / "summary" / "summary.md").read_text()
    assert ("| Spent on attempts that gave no valid result (2: 1 set aside and retried, 1 withheld) | cost $1.00 "
            "(61.5% of the run's); 6,600 tokens (54.5% of the run's) (fully accounted 2 of 2); 6 model calls (54.5% "
            "of the run's); machine time 130 s |") in md
    assert ("| Rate-limit waits (token log; attempts waiting at once each count) | 0.02 h (65 s) over 7 of 12 "
            "requests; 0.02 h (55 s) of it in attempts that gave no valid result |") in md
    cost_at = md.index("| Cost (at the config's prices")
    assert cost_at < md.index("| Spent on attempts") < md.index("| Rate-limit waits"), "beside the cost"
    assert "More figures" not in md, "both have lines of their own"


def test_an_unknown_cost_or_a_missing_token_log_is_none_with_why_never_0(tmp_path: Path) -> None:
    run_dir = build(tmp_path, b_cost=None, token_log=False)
    s = summarize(run_dir)
    assert s["wasted"]["cost_usd"] is None and s["wasted"]["share_of_cost"] is None and s["cost_usd"] is None
    assert s["wasted"]["cost_unknown"].startswith("unknown: 1 attempts have no cost (a model without a price")
    assert s["wasted"]["total"] == 6600, "tokens are known all the same"
    assert s["rate_limit_waits"]["wait_sec"] is None and s["rate_limit_waits"]["without_valid_result_sec"] is None
    assert s["rate_limit_waits"]["unknown"].startswith("no token log (gateway-tokens.jsonl in the run directory")
    md = (run_dir / "summary" / "summary.md").read_text()
    assert "| Spent on attempts that gave no valid result (2: 1 set aside and retried, 1 withheld) | cost unknown: 1 " \
           "attempts have no cost" in md
    assert "| Rate-limit waits (token log) | unknown: no token log (gateway-tokens.jsonl in the run directory" in md


def test_a_token_log_of_other_runs_only_leaves_the_waits_unknown(tmp_path: Path) -> None:
    run_dir = build(tmp_path, token_log=False)
    (run_dir / "gateway-tokens.jsonl").write_bytes(line("other-run.a.a1", waited=3.0))
    waits = summarize(run_dir)["rate_limit_waits"]
    assert waits["wait_sec"] is None and waits["unknown"] == "gateway-tokens.jsonl holds no request of run w"


def test_without_withheld_or_set_aside_attempts_nothing_was_wasted(tmp_path: Path) -> None:
    run_dir = make_repeat_run(tmp_path, "clean", {"a": [ok(1.0, usage=usage(2), cost_usd=0.5)]}, prices=PRICES)
    (run_dir / "gateway-tokens.jsonl").write_bytes(line("clean.a.a1", waited=12.5) + line("clean.a.a1"))
    s = summarize(run_dir)
    assert (s["wasted"]["attempts"], s["wasted"]["cost_usd"], s["wasted"]["share_of_cost"]) == (0, 0.0, 0.0)
    assert s["rate_limit_waits"]["wait_sec"] == 12.5 and s["rate_limit_waits"]["without_valid_result_sec"] == 0.0


@pytest.mark.parametrize("name", ["k1-summary.json", "summary-936a9d7.json", "summary-8cc9995.json"])
def test_a_summary_json_from_before_these_keys_reads_and_has_no_line_for_them(tmp_path: Path, name: str) -> None:
    old, _ = parse_summary(orjson.loads((DATA / name).read_bytes()))
    assert old.wasted is None and old.rate_limit_waits is None
    assert not {"wasted", "rate_limit_waits"} & old.model_fields_set, "told apart from a summarize that computed them"
    run = load_run(build(tmp_path))
    md = render_markdown(old.model_copy(update={"tasks": run.summary.tasks}), run.tasks, run.cost_note)
    assert "no valid result" not in md and "Rate-limit waits" not in md


def test_an_attempt_without_a_result_yet_is_in_the_waits_only(tmp_path: Path) -> None:
    """Still running, or its runner died and no queue set it aside: no spend of its own in the summary (as for the
    cost), its waits in the run's but not in those of attempts that gave no valid result."""
    run_dir = make_repeat_run(tmp_path, "live", {"a": [ok(1.0, usage=usage(1), cost_usd=0.5)], "d": [None]},
                              prices=PRICES)
    (run_dir / "tasks" / "d").mkdir()
    (run_dir / "gateway-tokens.jsonl").write_bytes(line("live.a.a1", waited=2.0) + line("live.d.a1", waited=7.0))
    s = summarize(run_dir)
    assert s["wasted"]["attempts"] == 0 and s["withheld"] == 1
    assert (s["rate_limit_waits"]["wait_sec"], s["rate_limit_waits"]["without_valid_result_sec"]) == (9.0, 0.0)
