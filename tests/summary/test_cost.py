"""Cost from token-log rows of each provider, as each provider's gateway parses its upstream's usage, priced at
the run's prices; unknown is None (and says why), never 0. Then what the summary makes of attempts' costs."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from hcu.gateway import anthropic_proxy, gemini_proxy, openai_proxy
from hcu.gateway.tokenlog import TORN_LINE_END, TokenLogRow, TokenUsage
from hcu.osworld.records.cost import Cost, cost_for_scope
from hcu.osworld.settings import ModelPrice
from hcu.osworld.summary.run_summary import summarize
from tests.summary.conftest import make_repeat_run, ok

GPT = ModelPrice(input_usd_per_mtok=2.0, cached_input_usd_per_mtok=0.5, output_usd_per_mtok=8.0)
CLAUDE = ModelPrice(input_usd_per_mtok=15.0, cached_input_usd_per_mtok=1.5, output_usd_per_mtok=75.0,
                    cache_write_usd_per_mtok=18.75)
GEMINI = ModelPrice(input_usd_per_mtok=0.3, cached_input_usd_per_mtok=0.075, output_usd_per_mtok=2.5)
PRICES = {"gpt-x": GPT, "claude-x": CLAUDE, "gemini-x": GEMINI}
SCOPE = "run.task.a1"


def row(provider: str, model: str | None, usage: TokenUsage | None, *, scope: str = SCOPE, counted: bool = True,
        outcome: str = "success") -> bytes:
    """A token-log line as the gateway writes it (TokenLogRow's fields, usage as the provider parsed it)."""
    record = TokenLogRow(time=1.0, task=scope, provider=provider, model=model, path="/v1/x", status=200,
                         outcome=outcome, counted=counted, calls_used=1, usage=usage, latency_sec=0.1)
    return orjson.dumps(record.model_dump()) + b"\n"


def log_of(tmp_path: Path, *lines: bytes) -> Path:
    path = tmp_path / "gateway-tokens.jsonl"
    path.write_bytes(b"".join(lines))
    return path


def anthropic_stream_usage() -> TokenUsage:
    """Claude Code streams: message_start carries the input (uncached, cache reads, cache writes), message_delta
    the final output count."""
    watch = anthropic_proxy.AnthropicWatch()
    start = {"message": {"id": "msg_1", "usage": {"input_tokens": 100, "cache_read_input_tokens": 50_000,
                                                  "cache_creation_input_tokens": 10_000, "output_tokens": 1}}}
    watch.event("message_start", orjson.dumps(start))
    watch.event("message_delta", orjson.dumps({"usage": {"output_tokens": 2_000}}))
    assert watch.usage is not None
    return watch.usage


@pytest.mark.parametrize("provider, model, usage, usd", [
    # Responses: 10,000 in (4,000 cached), 3,000 out (1,000 of it reasoning, billed as output)
    ("openai", "gpt-x", openai_proxy.usage_of({"input_tokens": 10_000, "input_tokens_details": {"cached_tokens": 4_000},
                                               "output_tokens": 3_000,
                                               "output_tokens_details": {"reasoning_tokens": 1_000}}),
     (6_000 * 2.0 + 4_000 * 0.5 + 3_000 * 8.0) / 1e6),
    # Chat Completions (Grok Build): 20,000 prompt (5,000 cached), 1,000 completion (400 reasoning)
    ("openai", "gpt-x", openai_proxy.usage_of({"prompt_tokens": 20_000,
                                               "prompt_tokens_details": {"cached_tokens": 5_000},
                                               "completion_tokens": 1_000,
                                               "completion_tokens_details": {"reasoning_tokens": 400}}),
     (15_000 * 2.0 + 5_000 * 0.5 + 1_000 * 8.0) / 1e6),
    # Anthropic: 100 uncached, 50,000 read from the cache, 10,000 written to it, 2,000 out
    ("anthropic", "claude-x", anthropic_stream_usage(),
     (100 * 15.0 + 50_000 * 1.5 + 10_000 * 18.75 + 2_000 * 75.0) / 1e6),
    # Gemini: 8,000 prompt (2,000 cached), 500 candidates + 1,500 thoughts (billed as output)
    ("gemini", "gemini-x", gemini_proxy.usage_of({"promptTokenCount": 8_000, "cachedContentTokenCount": 2_000,
                                                  "candidatesTokenCount": 500, "thoughtsTokenCount": 1_500}),
     (6_000 * 0.3 + 2_000 * 0.075 + 2_000 * 2.5) / 1e6),
])
def test_each_providers_rows_priced(tmp_path: Path, provider: str, model: str, usage: TokenUsage | None,
                                    usd: float):
    log = log_of(tmp_path, row(provider, model, usage), row(provider, model, usage, scope="run.task.a2"))
    assert cost_for_scope(log, SCOPE, PRICES) == pytest.approx(usd)
    assert cost_for_scope(log, "run.task.a2", PRICES) == pytest.approx(usd)
    assert cost_for_scope(log, "run.other.a1", PRICES) == 0.0, "a scope without rows spent nothing"


def test_anthropic_json_answer_records_its_cache_writes():
    usage = anthropic_proxy.usage_of({"input_tokens": 7, "cache_read_input_tokens": 3,
                                      "cache_creation_input_tokens": 90, "output_tokens": 5})
    assert usage == TokenUsage(input_tokens=100, cached_input_tokens=3, cache_write_input_tokens=90,
                               output_tokens=5)


def test_what_bills_and_what_does_not(tmp_path: Path):
    usage = TokenUsage(input_tokens=1_000_000, output_tokens=0)
    log = log_of(tmp_path,
                 row("openai", "gpt-x", usage),                                          # $2
                 row("openai", "gpt-x", usage, counted=False, outcome="disconnected"),   # billed all the same: $2
                 row("openai", "gpt-x", None, counted=False, outcome="rate_limited"),    # nothing was generated
                 row("openai", "gpt-x", None, counted=False, outcome="free"),
                 b'{"time": 1.0, "task": "run.task.a1", "provider": "op' + TORN_LINE_END)
    assert cost_for_scope(log, SCOPE, PRICES) == pytest.approx(4.0)


@pytest.mark.parametrize("line, why", [
    (row("openai", "gpt-unpriced", TokenUsage(input_tokens=5)), "no price for gpt-unpriced (1 rows)"),
    (row("openai", "gpt-x", None), "1 generations logged without tokens"),
    (b'{"task": "run.task.a1", "provider": "anthropic", "model": "claude-x", "counted": true, "usage": '
     b'{"input_tokens": 9, "cached_input_tokens": 0, "output_tokens": 1, "reasoning_tokens": 0}}\n',
     "1 Anthropic rows without a cache-write count"),
])
def test_unknown_is_none_never_zero(tmp_path: Path, line: bytes, why: str):
    log = log_of(tmp_path, row("openai", "gpt-x", TokenUsage(input_tokens=10)), line)
    assert cost_for_scope(log, SCOPE, PRICES) is None
    cost = Cost()
    for raw in log.read_bytes().splitlines():
        cost.add(orjson.loads(raw), PRICES)
    assert cost.unknown_because() == why and cost.value is None


def test_without_prices_or_a_token_log_the_cost_is_unknown(tmp_path: Path):
    log = log_of(tmp_path, row("openai", "gpt-x", TokenUsage(input_tokens=10)))
    assert cost_for_scope(log, SCOPE, None) is None
    assert cost_for_scope(None, SCOPE, PRICES) is None and cost_for_scope(tmp_path / "none", SCOPE, PRICES) is None


def test_the_summary_gives_cost_per_task_retried_apart_and_per_valid_result(tmp_path: Path):
    prices = {"gpt-5.5": {"input_usd_per_mtok": 1, "cached_input_usd_per_mtok": 0.1, "output_usd_per_mtok": 4}}
    results = {"a": [ok(1.0, cost_usd=1.5), ok(0.0, cost_usd=0.5)],
               "b": [ok(1.0, cost_usd=2.0), {"status": "error", "failure_classification": "agent", "cost_usd": 0.25}],
               "c": [ok(0.5, cost_usd=0.75), None]}
    retries = {"a.r2": [{"status": "error", "failure_classification": "guest", "duration_sec": 5.0,
                         "cost_usd": 0.0}],
               "c": [{"status": "error", "failure_classification": "upstream_error", "duration_sec": 9.0,
                      "cost_usd": 1.0}]}
    run_dir = make_repeat_run(tmp_path, "cost", results, retries=retries, prices=prices)
    s = summarize(run_dir)
    assert {row["task_id"]: row["cost_usd"] for row in s["per_task"]} == {"a": 2.0, "b": 2.25, "c": 0.75}
    assert (s["cost_usd"], s["retried"]["cost_usd"]) == (6.0, 1.0)
    assert s["valid"] == 4 and s["cost_per_valid_result_usd"] == pytest.approx(6.0 / 4)
    md = (run_dir / "summary" / "summary.md").read_text()
    assert ("| Cost (at the config's prices for gpt-5.5) | $6.00: scored attempts $5.00, retried $1.00; per valid "
            "result $1.50 |") in md
    rows = (run_dir / "summary" / "tasks.csv").read_text().splitlines()
    assert rows[0].endswith(",cost_usd,task_mean,task_repeats_scored") and rows[1].startswith("a,1,")
    assert rows[1].endswith(",1.5,0.5,2") and rows[6].startswith("c,2,") and ",missing," in rows[6]


def test_one_unknown_attempt_makes_the_sums_it_is_in_unknown(tmp_path: Path):
    prices = {"gpt-5.5": {"input_usd_per_mtok": 1, "cached_input_usd_per_mtok": 0.1, "output_usd_per_mtok": 4}}
    results = {"a": [ok(1.0, cost_usd=1.0), ok(1.0)], "b": [ok(0.0, cost_usd=2.0), ok(1.0, cost_usd=2.0)]}
    run_dir = make_repeat_run(tmp_path, "unknown", results, prices=prices)
    s = summarize(run_dir)
    assert {row["task_id"]: row["cost_usd"] for row in s["per_task"]} == {"a": None, "b": 4.0}
    assert s["cost_usd"] is None and s["cost_per_valid_result_usd"] is None and s["retried"]["cost_usd"] == 0.0
    assert "| Cost | unknown: 1 attempts have no cost (a model without a price" in (
        run_dir / "summary" / "summary.md").read_text()
