"""A scope's generations from the gateway's token log (written by the gateway's own writer): one step's metrics
per success with the failures before it, failures after the last success kept apart, cost from a price table,
and unknown never 0."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hcu.defaults import GATEWAY
from hcu.gateway.tokenlog import TokenLog, TokenLogRow
from hcu.osworld.evidence.cost import price_table
from hcu.osworld.evidence.generations import scope_generations
from hcu.osworld.records.usage import usage_for_scope

SCOPE = "run.task.a1"
PRICES = {"m-1": {"input_usd_per_mtok": 2.0, "cached_input_usd_per_mtok": 0.5, "output_usd_per_mtok": 10.0}}


def row(at: float, outcome: str, *, usage: tuple[int, int, int] | None = None, task: str = SCOPE,
        model: str = "m-1", wait: float = 0.0) -> dict:
    tokens = None if usage is None else {"input_tokens": usage[0], "cached_input_tokens": usage[1],
                                         "output_tokens": usage[2], "reasoning_tokens": 0}
    return TokenLogRow(time=at, task=task, provider="openai", model=model, path="/v1/responses", status=200,
                       outcome=outcome, counted=outcome == "success", calls_used=0, usage=tokens, latency_sec=1.5,
                       rate_limit_wait_sec=wait).model_dump()


@pytest.fixture
def token_log(tmp_path):
    path = tmp_path / "gateway-tokens.jsonl"
    log = TokenLog(path, GATEWAY.max_log_field_chars)
    for fields in [
        row(10.0, "success", usage=(1000, 400, 50)),
        row(12.0, "rate_limited", wait=4.0),
        row(20.0, "success", usage=(2000, 1500, 80), wait=1.0),
        row(21.0, "success", usage=(9, 0, 9), task="other.scope.a1"),
        row(25.0, "free"),
        row(30.0, "refused_budget"),
    ]:
        log.append(log.encode(fields), charged=True)
    log.close()
    return path


def test_steps_get_their_generation_and_the_failures_before_it(token_log):
    scope = scope_generations(token_log, SCOPE, price_table(PRICES))
    first, second = scope.generations
    assert (first.started_at, first.ended_at) == (8.5, 10.0)
    metrics = second.metrics()
    assert (metrics.prompt_tokens, metrics.cached_tokens, metrics.completion_tokens) == (2000, 1500, 80)
    assert metrics.extra["rate_limit_wait_sec"] == 5.0
    assert [f["outcome"] for f in metrics.extra["failed_requests"]] == ["rate_limited"]
    assert [r.outcome for r in scope.unanswered] == ["refused_budget"]
    assert first.cost_usd == pytest.approx((600 * 2.0 + 400 * 0.5 + 50 * 10.0) / 1e6)
    assert scope.total_cost_usd == pytest.approx(first.cost_usd + second.cost_usd)


def test_totals_match_the_usage_result_json_reports(token_log):
    usage = usage_for_scope(token_log, SCOPE)
    gens = scope_generations(token_log, SCOPE, {}).generations
    assert sum(g.row.usage.input_tokens for g in gens) == usage.input_tokens
    assert sum(g.row.usage.output_tokens for g in gens) == usage.output_tokens


def test_a_cost_is_unknown_never_zero(token_log, tmp_path):
    assert scope_generations(token_log, SCOPE, {}).total_cost_usd is None, "no price table"
    other = scope_generations(token_log, SCOPE, price_table({"m-2": PRICES["m-1"]}))
    assert other.total_cost_usd is None and other.generations[0].cost_usd is None, "no price for the model"
    assert scope_generations(None, SCOPE, price_table(PRICES)).total_cost_usd is None, "no token log"
    assert scope_generations(token_log, "idle.scope.a1", price_table(PRICES)).total_cost_usd == 0.0


def test_a_price_table_names_its_bad_key():
    with pytest.raises(ValidationError, match="output_usd_per_mtok"):
        price_table({"m-1": {"input_usd_per_mtok": 1.0}})
