"""A gateway's options, one model each way: its flags as pydantic settings (a field is a flag through `hcu.flags`,
its docstring the help, its default `hcu.defaults.GATEWAY`'s), parsed from a command line by the gateway and built
into one (`GatewayOptions.command`) by whoever starts a gateway (the queue's node gateways, the demo's stand-in);
and the config a gateway process runs with (`GatewayConfig`). Light on purpose: no gateway starts on import.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, field_validator

from hcu.defaults import GATEWAY, GatewayDefaults
from hcu.flags import Settings, to_flags
from hcu.gateway.descriptors import ProviderDescriptor
from hcu.gateway.pool import UpstreamSpecError, parse_upstreams

Port = Annotated[int, Field(gt=0, lt=65536)]


class GatewayConfig(GatewayDefaults):
    """One gateway process's settings: what it must be told, and every default of `hcu.defaults.GATEWAY`
    (described there), which the flags of `hcu.gateway.cli` may override."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_requests_per_task: int
    """Successful generations allowed per task scope (0 = no budget)."""
    out: Path
    """Token log (JSONL); counters are restored from it at start."""
    scope_key_file: Path | None = None
    """With a key file, a task scope is served only to requests carrying its secret (hcu.gateway.scope_secret);
    without one, any placeholder credential is accepted."""


class GatewayOptions(Settings):
    """The flags every gateway takes."""

    host: str
    """Address to listen on: the Docker bridge address the guests reach, not loopback."""
    out: Path
    """Token log (JSONL, one row per request); the gateway restores its counters from it on restart."""
    max_requests_per_task: int = Field(ge=0)
    """Successful generations allowed per task scope (0 = no budget)."""
    rate_limit_max_wait: float = Field(default=GATEWAY.rate_limit_max_wait_sec, ge=0)
    """Most seconds of rate-limit waits per client request before the 429 goes to the client."""
    scope_key_file: Path | None = None
    """Serve a task scope only to requests carrying its secret (an HMAC of the scope under this key; created
    when missing); the runner's --scope-key-file."""
    upstream_idle_timeout: float = Field(default=GATEWAY.upstream_idle_timeout_sec, gt=0)
    """Longest silence from the upstream, before its headers or between stream chunks."""
    header_timeout: float = Field(default=GATEWAY.header_timeout_sec, gt=0)
    """Close a client connection idle this long or still sending its request header."""
    max_connections_per_peer: int = Field(default=GATEWAY.max_connections_per_peer, ge=1)
    """Open client connections allowed per peer address."""
    refusal_interval: float = Field(default=GATEWAY.refusal_interval_sec, gt=0)
    """Seconds a task scope's refusals are counted over (the three rates below, one aggregate row)."""
    refusal_rows_per_interval: int = Field(default=GATEWAY.refusal_rows_per_interval, ge=0)
    """Refused requests of a scope per interval that get a token-log row each; the rest go into one aggregate row."""
    flood_refusals_per_interval: int = Field(default=GATEWAY.flood_refusals_per_interval, ge=1)
    """Refused requests of a scope per interval after which its requests get 429 unread until the interval ends."""
    flood_delay: float = Field(default=GATEWAY.flood_delay_sec, ge=0)
    """Seconds such a 429 is held before it goes out (one answer per connection per this long)."""
    free_calls_per_interval: int = Field(default=GATEWAY.free_calls_per_interval, ge=1)
    """Token-counting and model-listing calls forwarded per scope per interval; more get 429."""
    max_log_bytes_per_scope: int = Field(default=GATEWAY.max_log_bytes_per_scope, ge=1024)
    """Token-log bytes a scope's free calls and refusals may take; at it the scope is served no more and its
    attempt ends as guest_flood."""
    max_refusal_log_bytes: int = Field(default=GATEWAY.max_refusal_log_bytes, ge=0)
    """Token-log bytes all refusal rows may take; past it refusals are only counted."""

    def ports_to_serve(self) -> list[int]:
        raise NotImplementedError

    def argv(self) -> list[str]:
        """The command line that parses back into these options: a flag for each field given (the gateway's defaults
        stand for the others)."""
        return to_flags(self, type(self), only=self.model_fields_set)

    def command(self, provider: ProviderDescriptor, port: int, upstream_flags: Sequence[str] = ()) -> list[str]:
        """`provider`'s gateway started with the flags every gateway takes, as given here, on `port`;
        `upstream_flags` name its upstream where a flag does (its environment does otherwise). No credential is
        ever a flag."""
        flags = to_flags(self, GatewayOptions, only=self.model_fields_set)
        return [sys.executable, "-m", provider.module, *flags, provider.port_flag, str(port), *upstream_flags]

    def config(self) -> GatewayConfig:
        """The config these flags make (every flag but where to listen): each flag's value under the config's name
        for it, the flag's own or, for a duration, with the config's unit (`rate_limit_max_wait_sec`)."""
        given = self.model_dump(include=set(GatewayOptions.model_fields) - {"host"})
        return GatewayConfig(**{config_name(name): value for name, value in given.items()})


def config_name(flag_field: str) -> str:
    """The `GatewayConfig` field a flag of every gateway sets."""
    return flag_field if flag_field in GatewayConfig.model_fields else f"{flag_field}_sec"


class SinglePortOptions(GatewayOptions):
    port: Port
    """Port to listen on."""

    def ports_to_serve(self) -> list[int]:
        return [self.port]


class OpenAIOptions(GatewayOptions):
    ports: list[Port] = Field(min_length=1)
    """Ports to listen on, comma-separated: the tasks of all of them share one state."""
    upstreams: str
    """Comma-separated `host[:port]` or `host[:port]@deployment` entries."""
    upstream_kind: Literal["azure", "openai"] = "azure"
    """azure: Azure OpenAI's v1 API (`/openai/v1/...`, deployments by name); openai: any OpenAI-compatible API."""
    upstream_scheme: Literal["https", "http"] = "https"
    """http only for a relay or a stand-in on this host."""
    upstream_token: str | None = None
    """Visible to every local user through ps: prefer OSW_OPENAI_UPSTREAM_TOKEN."""
    pin_resources: str = ""
    """Comma-separated resource names behind a relay: each task gets one round-robin, sent as X-HCU-Resource."""

    @field_validator("upstreams")
    @classmethod
    def _upstreams_parse(cls, value: str) -> str:
        try:
            parse_upstreams(value)
        except UpstreamSpecError as exc:
            raise ValueError(str(exc).removeprefix("--upstreams: ")) from None
        return value

    @field_validator("pin_resources")
    @classmethod
    def _pins_are_names(cls, value: str) -> str:
        if value and any(not p or " " in p for p in value.split(",")):
            raise ValueError("expected a comma-separated list of resource names")
        return value

    def ports_to_serve(self) -> list[int]:
        return self.ports

    def pins(self) -> list[str]:
        return self.pin_resources.split(",") if self.pin_resources else []
