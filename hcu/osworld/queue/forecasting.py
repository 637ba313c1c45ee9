"""The campaign forecast of a run config (hcu/osworld/quota): the attempts still to run, the earlier runs it
learns from (`forecast_from`), the quota and the gateway's upstreams it is matched against, and this host's
memory; and the forecast QUEUE_STATUS.md keeps up to date from the run's own attempts.

The gateway's upstream labels come from `ray.node_gateway.upstream_args` (each node starts the gateway with
them), or else from the run's gateway's `/healthz` (which shows them to this host): a quota key no upstream matches
is refused there, before anything starts. A gateway that does not answer leaves them unknown; the dry run says so.

Without a `quota` in the config, the quota is what the upstreams state of themselves (quota/observed.py): the
limits in their answers as the run's gateway reports them, asked at the start and then every
`ADMISSION.observe_sec` while the run goes (the Ray nodes' gateways are read through the executor). The forecast
says where its quota came from.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from pydantic import ValidationError

from hcu.osworld.agents import agent_cli
from hcu.osworld.attempt.gateway_health import gateway_health
from hcu.osworld.errors import GatewayError
from hcu.osworld.guest.kinds import kind_for
from hcu.osworld.queue.state import TaskView
from hcu.osworld.quota.forecast import Campaign, Forecast, make_forecast
from hcu.osworld.quota.gateway_reading import GatewayReport
from hcu.osworld.quota.host_memory import memory_fit
from hcu.osworld.quota.limits import unmatched_key, upstreams_in_args
from hcu.osworld.quota.live import LiveForecast
from hcu.osworld.quota.observed import NOT_STATED, ObservedQuota, observed_quota, with_observed
from hcu.osworld.quota.profile import AttemptProfile, Sample, attempt_profile, read_pilots
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.run_config import AUTO, RunConfig


@dataclass(frozen=True)
class Upstreams:
    labels: list[str] | None
    source: str
    """Where they came from, or why they are unknown."""
    observed: ObservedQuota | None = None
    """What their answers stated of their limits (None: nothing, or not asked: the config has a quota)."""
    unobserved: str = NOT_STATED
    """Why nothing was observed."""


def known_upstreams(config: RunConfig) -> Upstreams:
    """The run's gateway upstream labels, where the queue can know them, and (without a quota in the config) the
    limits they stated."""
    if config.ray is not None and config.ray.node_gateway is not None:
        labels = upstreams_in_args(config.ray.node_gateway.upstream_args)
        return Upstreams(labels, "from ray.node_gateway.upstream_args" if labels else
                         "ray.node_gateway.upstream_args has no --upstreams",
                         unobserved="the nodes' gateways are read once the run goes")
    if config.gateway is None:
        return Upstreams(None, "no gateway in the config", unobserved="no gateway in the config")
    try:
        health = gateway_health(config.gateway).model_dump()
    except GatewayError:
        said = f"the gateway at {config.gateway} did not answer /healthz"
        return Upstreams(None, said, unobserved=said)
    labels = health.get("upstreams")
    if not isinstance(labels, list):
        said = f"{config.gateway}/healthz does not list them to this host"
        return Upstreams(None, said, unobserved=said)
    observed = None
    if not config.quota:
        with contextlib.suppress(ValidationError):  # a report this queue cannot read: nothing observed
            observed = observed_quota([GatewayReport.model_validate(health)], config.gateway)
    return Upstreams([str(label) for label in labels], f"from {config.gateway}/healthz", observed)


def quota_mismatch(config: RunConfig, upstreams: Upstreams) -> str | None:
    """The one-line error for a quota key that names no upstream of the run's gateway (None: all match)."""
    return unmatched_key(config.quota or {}, agent_cli(config.agent).provider.name, upstreams.labels)


def campaign(config: RunConfig, attempts: int, upstreams: Upstreams, done: int | None = None) -> Campaign:
    kind = kind_for(config)
    need = max(kind.memory_need(task.ram_size or config.ram_size)[0] for task in config.tasks)
    base = Campaign(attempts=attempts, max_active_tasks=config.active_ceiling,
                    provider=agent_cli(config.agent).provider.name, model=str(config.model), quota=config.quota,
                    upstreams=upstreams.labels, upstreams_from=upstreams.source, memory=memory_fit(need),
                    memory_binds=config.executor == "local", priced=str(config.model) in (config.prices or {}),
                    attempts_done=done, auto=config.max_active_tasks == AUTO)
    return base if config.quota else with_observed(base, upstreams.observed, upstreams.unobserved)


def pilots(config: RunConfig) -> Sample:
    """The attempts of `forecast_from` (PilotError for an entry that is not a run of this agent and model)."""
    return read_pilots(list(config.forecast_from or []), config.agent, str(config.model), config.effort,
                       dict(config.prices or {}))


def plan_forecast(config: RunConfig, attempts: int, done: int, upstreams: Upstreams,
                  own: list[AttemptProfile]) -> Forecast:
    """The forecast for `attempts` still to run, from `forecast_from` and the run's `own` ended attempts."""
    sample = pilots(config)
    if own:
        sample.attempts += own
        sample.sources.append(f"{config.run_dir} (this run): {len(own)} ended attempts that reached the agent phase")
    return make_forecast(sample, campaign(config, attempts, upstreams, done))


def live_forecast(config: RunConfig) -> LiveForecast:
    """The forecast QUEUE_STATUS.md shows; without a quota in the config it goes on reading what the upstreams
    state of their limits."""
    by = str(config.gateway) if config.executor == "local" else "the Ray nodes' gateways"
    return LiveForecast(pilots(config), campaign(config, 0, known_upstreams(config)), None if config.quota else by)


def finished_profile(config: RunConfig, view: TaskView, domain: str | None) -> AttemptProfile | None:
    """What an attempt of this run used, from the result.json its runner wrote (None: no result, it never reached
    the agent phase, or it ended upstream_rate_limit)."""
    if view.result is None:
        return None
    scope = AttemptId(run_id=str(config.run_id), task_id=view.task_id, attempt=view.attempt,
                      repeat=view.repeat).gateway_scope
    return attempt_profile(view.result, scope, view.result.task_domain or domain, agent_cli(config.agent).provider.name,
                           view.result.usage, view.result.cost_usd, config.rate_limit_resume_delay)
