"""The run over its time, for the run page's quota chart: running attempts and the admission limit from the queue's
events (logs/queue.jsonl), tokens and rate-limit waits per minute from the token log, and the quota they ran
against.

- Running attempts: +1 at each `launch` and `adopt` event, -1 at each `exit`. A queue's `start` sets the count to
  0 (the adoptions that follow it count the attempts still running); between a queue's stop and the next start
  the count is held (nothing records what ended meanwhile).
- The admission limit: each `limit` event's limit, held until the next.
- Tokens: the token log's rows of the run's attempt scopes, counted as the provider counts them against a
  tokens-per-minute quota (quota/profile.py `quota_tokens`) in the minute the request ended; per minute, averaged
  over bins of whole minutes (one minute, wider when the run is long: at most MAX_BINS bins).
- Waits: each request's `rate_limit_wait_sec` placed at the request's start (its end less its latency) and spread
  over the minutes it covers; per bin, the attempts waiting on average (seconds waited over the bin's seconds).
- Both also for the attempts that gave no valid result alone (summary/waste.py `ValidResults`, the summary's rule).

Both files only grow while a run goes: each is read from where the last reading ended (record_io.GrowingFile), the
token log into cells of (scope, minute), so a reload of the page reads only what was added; the series are drawn
again only when a file grew or an attempt's validity changed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from hcu.osworld.agents import agent_cli
from hcu.osworld.queue.events import QUEUE_LOG
from hcu.osworld.quota.limits import capacity, upstreams_in_args
from hcu.osworld.quota.profile import quota_tokens
from hcu.osworld.records.cost import token_rows
from hcu.osworld.records.manifest import Manifest
from hcu.osworld.records.result import Usage
from hcu.osworld.run_config import RunConfig
from hcu.osworld.summary.waste import ValidResults
from hcu.record_io import GrowingFile

MINUTE = 60.0
MAX_BINS = 360
"""A long run's minutes are grouped into at most this many bins (a 24-hour run: 4-minute bins)."""
RUNNING_EVENTS = {"start", "launch", "adopt", "exit"}

Points = list[tuple[float, float]]
"""(seconds since the run's first event, value)."""


@dataclass(frozen=True)
class Timeline:
    """The chart's series over [0, span] seconds from the run's first queue event or token-log request."""

    start: float
    """Unix time of 0."""
    span: float
    running: Points
    limit: Points
    events: dict[str, int]
    """How many of each event the running count and the limit come from (start, launch, adopt, exit, limit)."""
    bin_minutes: int
    tokens: Points
    """Tokens per minute, every request of the run."""
    tokens_wasted: Points
    """Tokens per minute of the attempts that gave no valid result."""
    waiting: Points
    """Attempts waiting on rate limits, on average over each bin."""
    waiting_wasted: Points
    requests: int
    token_total: int
    token_wasted: int
    wait_sec: float
    wait_wasted_sec: float
    has_events: bool
    has_token_log: bool


@dataclass
class _Cell:
    input: int = 0
    cached: int = 0
    output: int = 0
    wait: float = 0.0
    requests: int = 0


@dataclass
class _Read:
    """What the two files held so far."""

    events: list[tuple[float, str, int]] = field(default_factory=list)
    """(at, event, limit) of the events the series come from."""
    cells: dict[tuple[str, int], _Cell] = field(default_factory=dict)
    """(scope, Unix minute) -> the requests of that scope that ended (or waited) in that minute."""
    first_request: float = math.inf
    last_request: float = -math.inf
    first_event: float = math.inf
    last_event: float = -math.inf
    """Of every event (the run's time runs to its last: a stop, the end)."""


class RunTimeline:
    """A run's queue events and token-log cells, read as the files grow; the series kept until an input changes."""

    def __init__(self, run_dir: Path, token_log: Path | None, run_id: str, provider: str) -> None:
        self.events_file = GrowingFile(run_dir / QUEUE_LOG)
        self.log_file = GrowingFile(token_log) if token_log is not None else None
        self.prefix, self.provider = f"{run_id}.", provider
        self.read = _Read()
        self._drawn: tuple[tuple[object, ...], Timeline | None] | None = None

    def _refresh(self) -> None:
        read = self.read
        restarted, data = self.events_file.read()
        if restarted:
            read.events.clear()
            read.first_event, read.last_event = math.inf, -math.inf
        for line in data.splitlines():
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(event, dict) or not isinstance(at := event.get("at"), (int, float)):
                continue
            read.first_event, read.last_event = min(read.first_event, at), max(read.last_event, at)
            kind, limit = event.get("event"), event.get("limit")
            if kind in RUNNING_EVENTS or (kind == "limit" and isinstance(limit, int)):
                read.events.append((float(at), str(kind), limit if isinstance(limit, int) else 0))
        if self.log_file is not None:
            restarted, data = self.log_file.read()
            if restarted:
                read.cells.clear()
                read.first_request, read.last_request = math.inf, -math.inf
            self._add_rows(token_rows(data))

    def _add_rows(self, rows: Iterable[dict[str, Any]]) -> None:
        read, cells = self.read, self.read.cells
        for row in rows:
            scope, end = row.get("task"), row.get("time")
            if not isinstance(scope, str) or not scope.startswith(self.prefix) or not isinstance(end, (int, float)):
                continue
            latency, wait = (float(value) if isinstance(value := row.get(name), (int, float)) else 0.0
                             for name in ("latency_sec", "rate_limit_wait_sec"))
            begun = end - max(latency, wait)
            read.first_request, read.last_request = min(read.first_request, begun), max(read.last_request, end)
            cell = cells.setdefault((scope, int(end // MINUTE)), _Cell())
            cell.requests += 1
            usage = row.get("usage")
            if isinstance(usage, dict):
                cell.input += usage.get("input_tokens") or 0
                cell.cached += usage.get("cached_input_tokens") or 0
                cell.output += usage.get("output_tokens") or 0
            at, until = begun, begun + wait
            while at < until:  # the wait, minute by minute
                minute_end = (math.floor(at / MINUTE) + 1) * MINUTE
                cells.setdefault((scope, int(at // MINUTE)), _Cell()).wait += min(until, minute_end) - at
                at = minute_end

    def timeline(self, results: ValidResults) -> Timeline | None:
        """The series as the files stand now, for the attempts' validity in `results`; None when neither file has
        anything of the run."""
        self._refresh()
        key = (self.events_file.identity, self.events_file.offset,
               self.log_file and (self.log_file.identity, self.log_file.offset), results.ended_without,
               results.set_aside)
        if self._drawn is None or self._drawn[0] != key:
            self._drawn = (key, self._series(results))
        return self._drawn[1]

    def _series(self, results: ValidResults) -> Timeline | None:
        read = self.read
        times = [t for t in (read.first_event, read.last_event, read.first_request, read.last_request)
                 if math.isfinite(t)]
        if not times:
            return None
        start, end = min(times), max(times)
        running, limit, counts = _running_and_limit(read.events, start)
        first_minute = int(start // MINUTE)
        minutes = int(end // MINUTE) - first_minute + 1
        width = max(1, math.ceil(minutes / MAX_BINS))
        every, wasted = _binned(read.cells, results, first_minute, minutes, width)
        lengths = [min(width, minutes - b * width) * MINUTE for b in range(len(every))]
        xs = [max((first_minute + b * width) * MINUTE - start, 0.0) for b in range(len(every))]
        tokens = [[float(quota_tokens(self.provider, Usage.model_construct(
            input_tokens=c.input, cached_input_tokens=c.cached, output_tokens=c.output))) for c in part]
            for part in (every, wasted)]
        waits = [[c.wait for c in part] for part in (every, wasted)]

        def per(values: list[float], unit: float) -> Points:
            """Each bin's value per `unit` seconds of its length, at the bin's start."""
            return [(x, v * unit / length) for x, v, length in zip(xs, values, lengths, strict=True)]

        return Timeline(
            start=start, span=end - start, running=running, limit=limit, events=counts, bin_minutes=width,
            tokens=per(tokens[0], MINUTE), tokens_wasted=per(tokens[1], MINUTE), waiting=per(waits[0], 1.0),
            waiting_wasted=per(waits[1], 1.0), requests=sum(c.requests for c in every),
            token_total=int(sum(tokens[0])), token_wasted=int(sum(tokens[1])), wait_sec=sum(waits[0]),
            wait_wasted_sec=sum(waits[1]), has_events=self.events_file.identity is not None,
            has_token_log=self.log_file is not None)


def _running_and_limit(events: list[tuple[float, str, int]], start: float) -> tuple[Points, Points, dict[str, int]]:
    """Running attempts and the admission limit as step series, and how many events of each kind they hold."""
    running, limit, counts, now = [], [], dict.fromkeys(("start", "launch", "adopt", "exit", "limit"), 0), 0
    for at, kind, value in events:
        counts[kind] += 1
        if kind == "limit":
            limit.append((at - start, float(value)))
            continue
        now = 0 if kind == "start" else max(now + (-1 if kind == "exit" else 1), 0)
        running.append((at - start, float(now)))
    return running, limit, counts


def _binned(cells: dict[tuple[str, int], _Cell], results: ValidResults, first_minute: int, minutes: int,
            width: int) -> tuple[list[_Cell], list[_Cell]]:
    """The cells summed into bins of `width` minutes: every request of the run's attempts, and those of the
    attempts that gave no valid result."""
    bins = math.ceil(minutes / width)
    every, wasted = [_Cell() for _ in range(bins)], [_Cell() for _ in range(bins)]
    for (scope, minute), cell in cells.items():
        gave_none = results.gave_no_valid_result(scope)
        if gave_none is None or not 0 <= minute - first_minute < minutes:
            continue
        b = (minute - first_minute) // width
        for target in (every[b], wasted[b]) if gave_none else (every[b],):
            target.input += cell.input
            target.cached += cell.cached
            target.output += cell.output
            target.wait += cell.wait
            target.requests += cell.requests
    return every, wasted


@dataclass(frozen=True)
class QuotaLine:
    """The tokens-per-minute line the tokens are drawn against, or why there is none."""

    tpm: int | None
    name: str
    """The line's name in the legend ("" without a line)."""
    detail: str
    """Where the line comes from; without a line, why there is none."""


def run_provider(config: RunConfig | None) -> str | None:
    """The provider of the run's agent (None: no config.json that reads)."""
    return agent_cli(config.agent).provider.name if config is not None else None


def _healthz_bodies(manifest: Manifest | None) -> list[dict[str, Any]]:
    """The gateway's /healthz answers manifest.json recorded at the queue's starts, newest first."""
    bodies = [start.gateway_health.body for start in reversed(manifest.starts)] if manifest else []
    return [body for body in bodies if isinstance(body, dict)]


def _upstreams(config: RunConfig, bodies: list[dict[str, Any]]) -> list[str] | None:
    node_gateway = config.ray.node_gateway if config.ray else None
    if node_gateway is not None:
        return upstreams_in_args(node_gateway.upstream_args)
    listed = next((body["upstreams"] for body in bodies if isinstance(body.get("upstreams"), list)), None)
    return None if listed is None else [str(label) for label in listed]


def quota_line(config: RunConfig | None, manifest: Manifest | None) -> QuotaLine:
    """The config's tokens-per-minute `quota` for the run's provider or upstreams (quota/limits.py `capacity`, as
    the forecast reads it); else the sum of the token limits the gateways' upstreams stated, as manifest.json
    recorded their /healthz at the queue's last start that had any; else no line, and why."""
    bodies, provider = _healthz_bodies(manifest), run_provider(config)
    quota = (config.quota if config else None) or {}
    if quota and config is not None and provider is not None:
        found, _ = capacity(quota, provider, _upstreams(config, bodies), "tpm")
        if found is not None:
            return QuotaLine(found.per_minute, f"quota {found.per_minute:,} tpm",
                             f"the quota line: {found.of} in the config's quota")
    for body in bodies:
        stated = {label: seen.get("tokens") or {} for label, seen in (body.get("upstream_limits") or {}).items()
                  if isinstance(seen, dict)}
        limits = {label: tokens["limit"] for label, tokens in stated.items() if isinstance(tokens.get("limit"), int)}
        if limits:
            total = sum(limits.values())
            return QuotaLine(total, f"observed limit {total:,} tpm", "the quota line: the sum of the token limits "
                             f"{', '.join(sorted(limits))} stated, as manifest.json recorded the gateway's /healthz "
                             "(the config gives no tokens-per-minute quota)")
    return QuotaLine(None, "", "no quota line: the config gives no tokens-per-minute quota for this run's provider or "
                               "upstreams, and the run recorded no token limit its gateways' upstreams stated")
