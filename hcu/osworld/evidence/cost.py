"""What a generation cost: the run's price table (`settings.ModelPrice` per model, USD per million tokens) applied
to one token-log row by `hcu.osworld.records.cost`, the one pricing rule, so a step's cost and the attempt's
result.json `cost_usd` agree. Unknown is never zero: a model without a price, or a generation without token
counts, has no cost."""

from __future__ import annotations

from collections.abc import Mapping

from hcu.gateway.tokenlog import TokenUsage
from hcu.osworld.records.cost import usage_cost
from hcu.osworld.settings import ModelPrice

__all__ = ["ModelPrice", "Prices", "generation_cost", "price_table"]

Prices = Mapping[str, ModelPrice]


def price_table(prices: Mapping[str, Mapping[str, float] | ModelPrice] | None) -> dict[str, ModelPrice]:
    """The price table given as plain mappings (a config's `prices`) or as ModelPrice records."""
    return {model: ModelPrice.model_validate(price) for model, price in (prices or {}).items()}


def generation_cost(usage: TokenUsage | None, model: str | None, prices: Prices) -> float | None:
    price = prices.get(model or "")
    if usage is None or price is None:
        return None
    return usage_cost(usage.model_dump(), price)
