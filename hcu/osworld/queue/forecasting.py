"""The campaign forecast of a run config (hcu/osworld/quota): the attempts still to run, the earlier runs it
learns from (`forecast_from`), the quota and the gateway's upstreams it is matched against, and this host's
memory; and the forecast QUEUE_STATUS.md keeps up to date from the run's own attempts.

The gateway's upstream labels come from `ray.node_gateway.upstream_args` (each node starts the gateway with
them), or else, when the config has a quota, from the run's gateway's `/healthz` (which shows them to this host):
a quota key no upstream matches is refused there, before anything starts. A gateway that does not answer leaves
them unknown; the dry run says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from hcu.osworld.agents import agent_cli
from hcu.osworld.attempt.gateway_health import gateway_health
from hcu.osworld.errors import GatewayError
from hcu.osworld.guest.kinds import kind_for
from hcu.osworld.queue.config import RunConfig
from hcu.osworld.queue.state import TaskView
from hcu.osworld.quota.forecast import Campaign, Forecast, make_forecast
from hcu.osworld.quota.host_memory import memory_fit
from hcu.osworld.quota.limits import unmatched_key, upstreams_in_args
from hcu.osworld.quota.live import LiveForecast
from hcu.osworld.quota.profile import AttemptProfile, Sample, attempt_profile, read_pilots
from hcu.osworld.records.identity import AttemptId


@dataclass(frozen=True)
class Upstreams:
    labels: list[str] | None
    source: str
    """Where they came from, or why they are unknown."""


def known_upstreams(config: RunConfig) -> Upstreams:
    """The run's gateway upstream labels, where the queue can know them."""
    if config.ray is not None and config.ray.node_gateway is not None:
        labels = upstreams_in_args(config.ray.node_gateway.upstream_args)
        return Upstreams(labels, "from ray.node_gateway.upstream_args" if labels else
                         "ray.node_gateway.upstream_args has no --upstreams")
    if not config.quota or config.gateway is None:
        return Upstreams(None, "not asked: the config has no quota")
    try:
        labels = gateway_health(config.gateway).model_dump().get("upstreams")
    except GatewayError:
        return Upstreams(None, f"the gateway at {config.gateway} did not answer /healthz")
    if not isinstance(labels, list):
        return Upstreams(None, f"{config.gateway}/healthz does not list them to this host")
    return Upstreams([str(label) for label in labels], f"from {config.gateway}/healthz")


def quota_mismatch(config: RunConfig, upstreams: Upstreams) -> str | None:
    """The one-line error for a quota key that names no upstream of the run's gateway (None: all match)."""
    return unmatched_key(config.quota or {}, agent_cli(config.agent).provider.name, upstreams.labels)


def campaign(config: RunConfig, attempts: int, upstreams: Upstreams, done: int | None = None) -> Campaign:
    kind = kind_for(config)
    need = max(kind.memory_need(task.ram_size or config.ram_size)[0] for task in config.tasks)
    return Campaign(attempts=attempts, max_active_tasks=config.active_ceiling,
                    provider=agent_cli(config.agent).provider.name, model=str(config.model), quota=config.quota,
                    upstreams=upstreams.labels, upstreams_from=upstreams.source, memory=memory_fit(need),
                    memory_binds=config.executor == "local", priced=str(config.model) in (config.prices or {}),
                    attempts_done=done)


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
    return LiveForecast(pilots(config), campaign(config, 0, known_upstreams(config)))


def finished_profile(config: RunConfig, view: TaskView, domain: str | None) -> AttemptProfile | None:
    """What an attempt of this run used, from the result.json its runner wrote (None: no result, or it never
    reached the agent phase)."""
    if view.result is None:
        return None
    scope = AttemptId(run_id=str(config.run_id), task_id=view.task_id, attempt=view.attempt,
                      repeat=view.repeat).gateway_scope
    return attempt_profile(view.result, scope, view.result.task_domain or domain, agent_cli(config.agent).provider.name,
                           view.result.usage, view.result.cost_usd)
