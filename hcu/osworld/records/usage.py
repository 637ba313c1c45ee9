"""An attempt's model usage, read from the gateway's token log rows of its task scope."""

from __future__ import annotations

from pathlib import Path

from hcu.gateway.restore import TRACKED as GENERATION_OUTCOMES
from hcu.gateway.tokenlog import TokenLogRow, read_token_log
from hcu.osworld.records.result import Usage


def usage_for_scope(token_log: Path, scope: str) -> Usage | None:
    """Sum the rows of one gateway task scope; None when the log is missing (usage unknown, not zero)."""
    if not token_log.exists():
        return None
    usage = Usage(fully_accounted=True)
    for row in read_token_log(token_log):
        if row.task == scope:
            add_row(usage, row)
    usage.rate_limit_wait_sec = round(usage.rate_limit_wait_sec, 3)
    return usage


def add_row(usage: Usage, row: TokenLogRow) -> None:
    """Add one token-log row to `usage`; a counted generation logged without its tokens clears
    `fully_accounted`."""
    usage.requests += row.refusals.count if row.refusals is not None else 1  # an aggregate row stands for many
    usage.rate_limit_wait_sec += row.rate_limit_wait_sec or 0.0
    if not row.counted:
        return
    usage.model_calls += 1
    if row.usage is None:
        usage.fully_accounted = False
        return
    usage.input_tokens += row.usage.input_tokens or 0
    usage.cached_input_tokens += row.usage.cached_input_tokens or 0
    usage.output_tokens += row.usage.output_tokens or 0
    usage.reasoning_tokens += row.usage.reasoning_tokens or 0


def last_generation_outcome(token_log: Path | None, scope: str, since: float) -> str | None:
    """How the scope's last generation since `since` (Unix time) ended at the gateway (`success`, `failed`,
    `rate_limited`, `refused_budget`, ...): the gateway's verdict, not the CLI's wording. None when there was
    none, or no token log to read."""
    if token_log is None:
        return None
    last = None
    for row in read_token_log(token_log):
        if row.task == scope and row.time >= since and row.outcome in GENERATION_OUTCOMES:
            last = row.outcome
    return last
