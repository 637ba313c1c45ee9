"""What a generation cost, from the run's price table (model -> USD per million tokens). Unknown is never zero:
a model without a price, or a generation without token counts, has no cost.

The token log counts cached input inside `input_tokens` and has no separate count of cache writes: cache writes
are priced as uncached input, and `cache_write_usd_per_mtok` is accepted but has nothing to price yet.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from hcu.gateway.tokenlog import TokenUsage

PER_MTOK = 1_000_000


class ModelPrice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_usd_per_mtok: float = Field(ge=0)
    output_usd_per_mtok: float = Field(ge=0)
    """Output includes reasoning tokens."""
    cached_input_usd_per_mtok: float | None = Field(default=None, ge=0)
    """Default: the input price."""
    cache_write_usd_per_mtok: float | None = Field(default=None, ge=0)


Prices = Mapping[str, ModelPrice]


def price_table(prices: Mapping[str, Mapping[str, float] | ModelPrice] | None) -> dict[str, ModelPrice]:
    """The price table given as plain mappings (a config's `prices`) or as ModelPrice records."""
    return {model: ModelPrice.model_validate(price) for model, price in (prices or {}).items()}


def generation_cost(usage: TokenUsage | None, model: str | None, prices: Prices) -> float | None:
    price = prices.get(model or "")
    if usage is None or price is None:
        return None
    cached_price = price.input_usd_per_mtok if price.cached_input_usd_per_mtok is None else \
        price.cached_input_usd_per_mtok
    uncached = max(0, usage.input_tokens - usage.cached_input_tokens)
    total = (uncached * price.input_usd_per_mtok + usage.cached_input_tokens * cached_price
             + usage.output_tokens * price.output_usd_per_mtok)
    return round(total / PER_MTOK, 8)
