"""What model calls cost: token-log rows priced with the run's `prices` (USD per million tokens per model).

The gateway logs every provider's tokens in one convention (hcu.gateway.tokenlog): `input_tokens` is the whole
prompt, `cached_input_tokens` the part read from the prompt cache, `cache_write_input_tokens` the part written to
it (Anthropic only), `output_tokens` everything generated, reasoning included. So a row costs

    (input - cached - cache_write) x input price + cached x cached price + cache_write x cache-write price
    + output x output price

at the price of the model the client asked for. Every row that carries usage is priced, counted against the
budget or not (the upstream reported tokens, so it bills them); rows without usage that were never generations
cost nothing. The cost is unknown (None, never 0) when a row names a model without a price, when a counted
generation was logged without its tokens, or when an Anthropic row predates the cache-write count.

Where a cost is computed: the runner prices its own attempt (run_task's `prices` setting, a run config key and a
flag from the same field) when it reads its usage, and writes both into result.json. That way result.json is
written once, by one process, from the same rows that give its `usage`; a run_task started by hand prices
itself; and the queue never rewrites a record another process wrote (a queue killed between a runner's exit and a
later stamp would otherwise need to tell "not yet priced" from "unknown"). The queue prices only what no runner
can: an attempt whose runner died without a result (retry.json) and the run's spend for `max_cost_usd`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from pydantic import Field

from hcu.flags import Settings

PER_TOKEN = 1e-6
"""Prices are per million tokens."""
NO_MODEL = "(no model)"



class ModelPrice(Settings):
    """What one model costs under the user's contract, in USD per million tokens (hcu ships no prices: they
    differ per contract and change)."""

    input_usd_per_mtok: float = Field(ge=0)
    """Input that was not read from the provider's prompt cache."""
    cached_input_usd_per_mtok: float = Field(ge=0)
    """Input read from the prompt cache."""
    output_usd_per_mtok: float = Field(ge=0)
    """Everything generated, reasoning included."""
    cache_write_usd_per_mtok: float | None = Field(default=None, ge=0)
    """Input written to the prompt cache: Anthropic bills it apart, so an Anthropic model needs it and no other
    model takes it."""


def usage_cost(usage: Mapping[str, object], price: ModelPrice) -> float | None:
    """USD for one row's usage; None when it wrote to a cache the price has no cache-write rate for."""
    tokens = {key: int(value) if isinstance(value, int) else 0 for key, value in usage.items()}
    cached, written = tokens.get("cached_input_tokens", 0), tokens.get("cache_write_input_tokens", 0)
    if written and price.cache_write_usd_per_mtok is None:
        return None
    uncached = max(tokens.get("input_tokens", 0) - cached - written, 0)
    return PER_TOKEN * (uncached * price.input_usd_per_mtok + cached * price.cached_input_usd_per_mtok
                        + written * (price.cache_write_usd_per_mtok or 0.0)
                        + tokens.get("output_tokens", 0) * price.output_usd_per_mtok)


@dataclass
class Cost:
    """The sum over some token-log rows, and what kept part of it unknown."""

    usd: float = 0.0
    """What the priced rows cost."""
    unpriced: Counter[str] = field(default_factory=Counter)
    """Rows by model that could not be priced (no price for the model, or a cache write without its rate)."""
    unaccounted: int = 0
    """Counted generations the gateway logged without their tokens."""
    without_cache_writes: int = 0
    """Anthropic rows logged before the gateway recorded cache writes apart."""

    def add(self, row: Mapping[str, object], prices: Mapping[str, ModelPrice]) -> None:
        usage = row.get("usage")
        if not isinstance(usage, dict):
            self.unaccounted += bool(row.get("counted"))
            return
        if row.get("provider") == "anthropic" and "cache_write_input_tokens" not in usage:
            self.without_cache_writes += 1
            return
        model = str(row.get("model") or row.get("deployment") or NO_MODEL)
        price = prices.get(model)
        usd = usage_cost(usage, price) if price is not None else None
        if usd is None:
            self.unpriced[model] += 1
        else:
            self.usd += usd

    @property
    def known(self) -> bool:
        return not (self.unpriced or self.unaccounted or self.without_cache_writes)

    @property
    def value(self) -> float | None:
        """The cost in USD, or None when any row could not be priced."""
        return round(self.usd, 6) if self.known else None

    def unknown_because(self) -> str:
        """Why the cost is unknown, in words ("" when it is known)."""
        parts = [f"no price for {model} ({rows} rows)" for model, rows in sorted(self.unpriced.items())]
        if self.unaccounted:
            parts.append(f"{self.unaccounted} generations logged without tokens")
        if self.without_cache_writes:
            parts.append(f"{self.without_cache_writes} Anthropic rows without a cache-write count")
        return "; ".join(parts)


def token_rows(data: bytes) -> Iterator[dict]:
    """The complete rows of a token log's bytes (a torn or foreign line is skipped, as read_token_log does)."""
    for line in data.splitlines():
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(row, dict):
            yield row


def cost_for_scope(token_log: Path | None, scope: str, prices: Mapping[str, ModelPrice] | None) -> float | None:
    """What one attempt scope's rows cost; None when unknown (no token log, or a row that cannot be priced)."""
    if token_log is None or not token_log.exists():
        return None
    cost = Cost()
    for row in token_rows(token_log.read_bytes()):
        if row.get("task") == scope:
            cost.add(row, prices or {})
    return cost.value
