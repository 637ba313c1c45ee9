"""What one attempt of an agent and model uses, read from earlier runs of the same agent and model
(`forecast_from`) and from the run's own finished attempts.

Per attempt: model calls (counted generations), input tokens (the whole prompt), cached input, output, the agent
phase's duration (result.json `phases`, name "agent") less its rate-limit waits (the time the attempt was demanding
quota, not waiting for it), the whole attempt's duration with and without those waits, and its cost at this run's
prices. The waits are the gateway's (every request's, in the token log) and the session's resume delays after turns
that ended on a rate limit (`rate_limit_resumes` x the run's `rate_limit_resume_delay`): a pilot throttled by its
quota waited, and the campaign's own quota is forecast apart (forecast.py), so its waits must not count twice.
Only attempts that reached the agent phase say anything about usage: an attempt that failed before it is left out,
and so is one that ended `upstream_rate_limit` (cut short by the quota, it tells neither an attempt's length nor
its usage; its retry does).

An earlier run's attempts come from `tasks/*/result.json` and `retries/*/result.json`; their tokens from the run's
token log (`gateway-tokens.jsonl`), row by row, so they are priced at this run's `prices`. A line that cannot be
read (torn by a crash, or not a row) is skipped and reported; a log with no row of the run is foreign: reported
and skipped whole (its attempts then give durations only); an attempt with a row of another model gets no token
figures. The run's own attempts come from their result.json (`usage`, `cost_usd`): the runner read them from the
same log, at the same prices.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import orjson
from pydantic import ValidationError

from hcu.gateway.tokenlog import TokenLogRow
from hcu.osworld.agents import agent_cli
from hcu.osworld.errors import HcuOSWorldError
from hcu.osworld.quota.delivered import Delivered, DeliveredMeter
from hcu.osworld.records.cost import Cost, ModelPrice
from hcu.osworld.records.identity import AttemptId, attempt_of_scope
from hcu.osworld.records.layout import RESULT_FILE
from hcu.osworld.records.result import TaskResult, Usage, result_if_readable
from hcu.osworld.records.usage import add_row
from hcu.osworld.settings import LimitSettings

TOKEN_LOG = "gateway-tokens.jsonl"
AGENT_PHASE = "agent"
SHOWN_LINES = 5
"""Unreadable line numbers named in a note (the count is always given)."""
RATE_LIMITED = "upstream_rate_limit"
RESUME_DELAY_SEC: float = LimitSettings.model_fields["rate_limit_resume_delay"].default
"""A pilot's `rate_limit_resume_delay` when its config.json has none."""

COUNTED_TOKENS = {
    "openai": "input (cached included) + output: OpenAI and Azure OpenAI count the whole prompt and the output",
    "gemini": "input (cached included) + output: Gemini counts the whole prompt and the output",
    "anthropic": "input less cache reads (cache writes included) + output: Anthropic leaves cache reads out of its "
                 "input-token limits on recent models",
}
"""Which tokens count against a tokens-per-minute quota, per provider."""


def quota_tokens(provider: str, usage: Usage) -> int:
    """The tokens of `usage` that count against the provider's tokens-per-minute limit (COUNTED_TOKENS)."""
    counted_input = usage.input_tokens - usage.cached_input_tokens if provider == "anthropic" else usage.input_tokens
    return counted_input + usage.output_tokens


class PilotError(HcuOSWorldError):
    """A `forecast_from` entry that is not a run of this agent and model (one line, without the key)."""


@dataclass(frozen=True)
class AttemptProfile:
    """What one attempt used; None where it is unknown."""

    attempt_id: str
    domain: str | None
    agent_sec: float
    active_sec: float | None
    """The agent phase less its rate-limit waits; None when the waits took all of it."""
    duration_sec: float | None
    waited_sec: float = 0.0
    """Its rate-limit waits: the gateway's and the resume delays after rate-limited turns."""
    calls: int | None = None
    input_tokens: int | None = None
    cached_input_tokens: int | None = None
    output_tokens: int | None = None
    quota_tokens: int | None = None
    cost_usd: float | None = None

    @property
    def unthrottled_sec(self) -> float | None:
        """The whole attempt less its rate-limit waits: what it takes on a quota with room to spare."""
        left = None if self.duration_sec is None else self.duration_sec - self.waited_sec
        return left if left is not None and left > 0 else None

    @property
    def tokens_per_minute(self) -> float | None:
        return None if self.quota_tokens is None or not self.active_sec else self.quota_tokens * 60 / self.active_sec

    @property
    def calls_per_minute(self) -> float | None:
        return None if self.calls is None or not self.active_sec else self.calls * 60 / self.active_sec


def attempt_profile(result: TaskResult, attempt_id: str, domain: str | None, provider: str,
                    usage: Usage | None, cost_usd: float | None, resume_delay_sec: float) -> AttemptProfile | None:
    """An attempt's profile from its result and its usage, its sessions resumed after `resume_delay_sec` (None: it
    never reached the agent phase, or it ended upstream_rate_limit)."""
    agent = [p.duration_sec for p in result.phases if p.name == AGENT_PHASE and p.status != "skipped"]
    if not agent or agent[0] <= 0 or result.failure_classification == RATE_LIMITED:
        return None
    waited = (usage.rate_limit_wait_sec if usage is not None else 0.0) + result.rate_limit_resumes * resume_delay_sec
    active = agent[0] - waited
    profile = AttemptProfile(attempt_id, domain, agent[0], active if active > 0 else None, result.duration_sec,
                             waited)
    if usage is None or not usage.fully_accounted:
        return profile
    return replace(profile, calls=usage.model_calls, input_tokens=usage.input_tokens,
                   cached_input_tokens=usage.cached_input_tokens, output_tokens=usage.output_tokens,
                   quota_tokens=quota_tokens(provider, usage), cost_usd=cost_usd)


@dataclass
class Sample:
    """Attempt profiles and what was said while reading them."""

    attempts: list[AttemptProfile] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    """One line per run read: how many attempts it gave."""
    notes: list[str] = field(default_factory=list)
    """Lines skipped, logs set aside, settings that differ."""
    delivered: dict[str, Delivered] = field(default_factory=dict)
    """Per run read (its path) that its quota throttled: what the quota delivered while it bound (delivered.py)."""


@dataclass(frozen=True)
class PilotRun:
    """An earlier run directory of this agent and model."""

    path: Path
    run_id: str
    effort: str | None
    domains: dict[str, str | None]
    """Task id -> its domain in that run's config."""
    token_log: Path | None
    resume_delay_sec: float
    """Its `rate_limit_resume_delay`."""


def open_pilot(path: Path, agent: str, model: str, own_run_dir: Path | None = None) -> PilotRun:
    """The run at `path`; PilotError when it is not a run, is another agent's or model's, or is this run."""
    if own_run_dir is not None and path.resolve() == own_run_dir.resolve():
        raise PilotError(f"{path} is this run's own directory (its finished attempts count already)")
    try:
        config = orjson.loads((path / "config.json").read_bytes())
        their_agent, run_id, tasks = config["agent"], str(config.get("run_id") or path.name), config["tasks"]
        their_model = config.get("model") or agent_cli(their_agent).model
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        raise PilotError(f"{path} is not a run directory (no readable config.json naming its agent and tasks)") \
            from None
    if their_agent != agent:
        raise PilotError(f"{path} is a run of agent {their_agent}; this run's agent is {agent}")
    if their_model != model:
        raise PilotError(f"{path} is a run of model {their_model}; this run's model is {model}")
    domains = {}
    for task in tasks if isinstance(tasks, list) else []:
        entry = {"id": task} if isinstance(task, str) else task
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            domains[entry["id"]] = entry.get("task_domain") or config.get("task_domain")
    logged = path / TOKEN_LOG
    stored = Path(str(config.get("token_log") or logged))
    token_log = logged if logged.is_file() else stored if stored.is_file() else None
    delay = config.get("rate_limit_resume_delay")
    return PilotRun(path, run_id, config.get("effort"), domains, token_log,
                    float(delay) if isinstance(delay, (int, float)) else RESUME_DELAY_SEC)


def read_pilots(paths: list[Path], agent: str, model: str, effort: str | None,
                prices: dict[str, ModelPrice]) -> Sample:
    """The attempt profiles of the runs at `paths` (PilotError on one that is not a run of this agent and model)."""
    sample = Sample()
    provider = agent_cli(agent).provider.name
    for path in paths:
        run = open_pilot(path, agent, model)
        if run.effort is not None and effort is not None and run.effort != effort:
            sample.notes.append(f"{path} ran effort {run.effort}; this run's is {effort}")
        meter = DeliveredMeter()
        usages = _usage_by_scope(run, provider, model, prices, sample.notes, meter)
        if (delivered := meter.delivered()) is not None:
            sample.delivered[str(path)] = delivered
        found = with_tokens = cut_short = 0
        for result_path in sorted([*path.glob(f"tasks/*/{RESULT_FILE}"), *path.glob(f"retries/*/{RESULT_FILE}")]):
            result = result_if_readable(result_path)
            scope = _scope_of(result, run.run_id)
            if result is None or scope is None:
                sample.notes.append(f"{result_path}: not a readable result of run {run.run_id}; skipped")
                continue
            usage, cost = usages.get(scope, (Usage(fully_accounted=True), Cost())) if usages is not None \
                else (None, None)
            profile = attempt_profile(result, scope, result.task_domain or run.domains.get(str(result.task_id)),
                                      provider, usage, None if cost is None else cost.value, run.resume_delay_sec)
            if profile is not None:
                sample.attempts.append(profile)
                found += 1
                with_tokens += profile.quota_tokens is not None
            cut_short += result.failure_classification == RATE_LIMITED
        cut = f"; {cut_short} that ended {RATE_LIMITED} left out (cut short by the quota)" if cut_short else ""
        sample.sources.append(f"{path}: {found} attempts that reached the agent phase, {with_tokens} with tokens{cut}")
    return sample


def _scope_of(result: TaskResult | None, run_id: str) -> str | None:
    if result is None or result.task_id is None or result.attempt is None:
        return None
    attempt = AttemptId(run_id=result.run_id or run_id, task_id=result.task_id, attempt=result.attempt,
                        repeat=result.repeat)
    return attempt.gateway_scope if attempt.run_id == run_id else None


def _usage_by_scope(run: PilotRun, provider: str, model: str, prices: dict[str, ModelPrice], notes: list[str],
                    meter: DeliveredMeter) -> dict[str, tuple[Usage, Cost]] | None:
    """Each attempt scope's usage and cost in the run's token log, each row also added to `meter`; None (with a
    note) when it has no usable log."""
    if run.token_log is None:
        notes.append(f"{run.path}: no token log; its attempts give durations only")
        return None
    task_ids = frozenset(run.domains)
    scopes: dict[str, tuple[Usage, Cost]] = {}
    unreadable: list[int] = []
    other_model: set[str] = set()
    for number, line in enumerate(run.token_log.read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = TokenLogRow.model_validate(orjson.loads(line))
        except (orjson.JSONDecodeError, ValidationError):
            unreadable.append(number)
            continue
        if attempt_of_scope(row.task, run.run_id, task_ids) is None:
            continue  # another run's row, on a gateway the runs shared
        usage, cost = scopes.setdefault(row.task, (Usage(fully_accounted=True), Cost()))
        if row.model is not None and row.model != model:
            other_model.add(row.task)
        counted_before = quota_tokens(provider, usage)
        add_row(usage, row)
        meter.add(row.time, row.upstream, row.rate_limit_wait_sec > 0 or row.outcome == "rate_limited",
                  quota_tokens(provider, usage) - counted_before, int(row.counted))
        cost.add(row.model_dump(), prices)
    if unreadable:
        shown = ", ".join(str(n) for n in unreadable[:SHOWN_LINES]) + (", ..." if len(unreadable) > SHOWN_LINES else "")
        notes.append(f"{run.token_log}: {len(unreadable)} unreadable lines skipped (torn or not a row: line {shown})")
    if not scopes:
        notes.append(f"{run.token_log}: no row of run {run.run_id} (a foreign token log); skipped, its attempts "
                     "give durations only")
        return None
    if other_model:
        notes.append(f"{run.token_log}: {len(other_model)} attempts with rows of another model than {model}; "
                     "their tokens are left out")
        for scope in other_model:
            scopes[scope][0].fully_accounted = False
    return scopes
