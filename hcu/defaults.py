"""Every default hcu runs with: per agent, per benchmark version, for guests and for the gateways.

Registries read by the flags, the run config, the agent adapters, the guest, the gateways and the manifest alike,
so a default is written here once.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from hcu import REPO_ROOT

AgentName = Literal["codex", "claude-code", "gemini-cli", "grok-build"]
Provider = Literal["openai", "anthropic", "gemini"]
BenchmarkVersion = Literal["v1", "v2"]

ASSET_CACHE_DIR = REPO_ROOT / "assets"
"""Where task files downloaded for setup and evaluation are cached (`asset_cache`)."""


class AgentDefaults(BaseModel):
    model_config = ConfigDict(frozen=True)

    provider: Provider
    """Which gateway the agent's CLI talks to."""
    model: str
    effort: str
    gateway_port: int
    """The gateway's port on the Docker bridge when the run names no gateway."""
    artifacts: tuple[str, ...]
    """Files in artifacts/ the agent uploads into the guest (scripts/fetch-agents.sh puts them there); the
    first is the CLI itself."""


AGENTS: dict[AgentName, AgentDefaults] = {
    "codex": AgentDefaults(provider="openai", model="gpt-5.5", effort="xhigh", gateway_port=8611,
                           artifacts=("codex",)),
    "claude-code": AgentDefaults(provider="anthropic", model="claude-opus-5", effort="xhigh", gateway_port=8537,
                                 artifacts=("claude-code",)),
    "gemini-cli": AgentDefaults(provider="gemini", model="gemini-3.8-flash", effort="high", gateway_port=8571,
                                artifacts=("gemini-cli.tgz", "node")),
    "grok-build": AgentDefaults(provider="openai", model="grok-4.7", effort="xhigh", gateway_port=8611,
                                artifacts=("grok",)),
}


class BenchmarkDefaults(BaseModel):
    model_config = ConfigDict(frozen=True)

    client_password: str
    """The guest user's sudo password baked into that version's image."""
    volume_size: int
    """Guest disk in GiB; must not exceed the image's virtual size."""


BENCHMARKS: dict[BenchmarkVersion, BenchmarkDefaults] = {
    "v1": BenchmarkDefaults(client_password="password", volume_size=64),
    "v2": BenchmarkDefaults(client_password="osworld-public-evaluation", volume_size=100),
}


class GuestDefaults(BaseModel):
    model_config = ConfigDict(frozen=True)

    ram_size: str = "4G"
    cpu_cores: int = 4
    qemu_docker_image: str = "happysixd/osworld-docker"
    """The official container that boots the guest qcow2 with QEMU/KVM."""
    test_desktop_image: str = "hcu-test-desktop:latest"
    """The locally built stand-in (`make test-desktop`)."""
    boot_timeout_sec: float = 300.0
    memory_overhead: str = "512M"
    """What the official image needs beyond RAM_SIZE: it exits 17 when RAM_SIZE plus 500 MB exceeds the host's
    available memory."""
    memory_margin: str = "512M"
    """Kept free on top of every guest's need, for the host's own processes and for the image's second check
    just before QEMU starts."""
    test_desktop_memory: str = "1G"
    """What one test desktop takes with an application open (it ignores RAM_SIZE)."""
    memory_poll_sec: float = 1.0
    """How often a guest waiting for memory reads the host's available memory again."""
    home: str = "/home/user"
    """The guest user's home: where agents run and inherited configuration is removed."""


GUEST = GuestDefaults()


class SetupDefaults(BaseModel):
    model_config = ConfigDict(frozen=True)

    step_timeout_sec: float = 300.0
    """Each setup or postconfig step: well under the phase timeout, since OSWorld's in-guest server waits up to 30
    minutes for some (a window of an opened file) and its controller does not bound them."""
    app_start_timeout_sec: float = 180.0
    """An application to show up after the step that starts it (measured first starts are 2-15 s, GIMP the
    slowest; a loaded 2-core machine running several guests stretches them several times); an `open` step ends
    here when no window of the file came."""


SETUP = SetupDefaults()


class GatewayDefaults(BaseModel):
    model_config = ConfigDict(frozen=True)

    rate_limit_max_wait_sec: float = 300.0
    """Most seconds of rate-limit waits per client request before the 429 goes to the client."""
    upstream_idle_timeout_sec: float = 300.0
    """Longest silence from the upstream, before its headers or between stream chunks."""
    upstream_connect_timeout_sec: float = 10.0
    header_timeout_sec: float = 15.0
    """Longest a client connection may sit idle or take to send a complete request header."""
    max_connections_per_peer: int = 64
    """Open client connections allowed per peer address; more are closed at once."""
    max_body_bytes: int = 64 * 1024 * 1024
    """Largest request body, as sent and as decoded: a screenshot-heavy request fits."""
    body_bytes_per_peer: int = 256 * 1024 * 1024
    """Request bodies one peer address may have in the gateway's memory at once (read or being forwarded)."""
    body_idle_timeout_sec: float = 30.0
    """Longest pause while a client sends its request body."""
    body_timeout_sec: float = 120.0
    """Longest a client may take to send its whole request body."""
    drain_timeout_sec: float = 120.0
    """After a client leaves a generation, how long the gateway keeps reading the upstream's answer to learn
    whether it completed (and so counts)."""
    drain_max_bytes: int = 64 * 1024 * 1024
    """After a client leaves a generation, how much more of the upstream's answer the gateway reads."""
    client_write_timeout_sec: float = 60.0
    """Longest a client may leave a stream unread (the gateway's writes to it waiting) before it counts as
    gone; the generation is then read on as for any client that left."""
    max_log_field_chars: int = 256
    """Longest text field of a token-log row (model, ids); longer values are cut and their length recorded."""
    refusal_interval_sec: float = 60.0
    """The interval a task scope's refusals are counted over: the three rates below are per interval, and one
    aggregate row covers one."""
    refusal_rows_per_interval: int = 10
    """Refusals of one scope per interval that get a token-log row each; the rest are counted into one aggregate
    row per interval (how many, of which kinds, first and last time)."""
    flood_refusals_per_interval: int = 600
    """Refusals of one scope per interval after which, until the interval ends, every request of the scope is
    answered 429 with Retry-After before anything of it is read or forwarded."""
    flood_delay_sec: float = 1.0
    """How long such a 429 (and the refusal of a scope at its token-log ceiling) is held before it goes out: a
    client that ignores Retry-After gets one answer per connection per this long, so a flood costs the gateway
    about `max_connections_per_peer` answers a second."""
    free_calls_per_interval: int = 30
    """Token-counting and model-listing calls forwarded per scope per interval; more are refused 429 (the CLIs
    make a few per generation at most)."""
    max_log_bytes_per_scope: int = 1024 * 1024
    """Token-log bytes one task scope's free traffic may take: the rows of its requests that used no budget slot
    (free calls, refusals, aggregate rows; ~2,000 rows). An attempt's CLI takes a few KB of them; a scope
    flooding at the rates above adds ~18 KB a minute. At the ceiling the gateway serves the scope no more and
    the runner ends its attempt as `guest_flood`; every other scope goes on. Generations are bounded by the
    budget instead."""
    max_refusal_log_bytes: int = 64 * 1024 * 1024
    """Token-log bytes all refusal rows (their own and aggregate) may take in one log; past it refusals are only
    counted (in `/healthz`), while every charged row is still written."""


GATEWAY = GatewayDefaults()


class EvidenceDefaults(BaseModel):
    model_config = ConfigDict(frozen=True)

    guest_dir: str = "evidence"
    """Under the guest's hcu folder: where computer-use keeps the attempt's call log and step screenshots (its
    size cap is computer-use's own, `hcu.computer_use.call_log.DEFAULT_CAP_BYTES`)."""
    collect_timeout_sec: float = 120.0
    """Longest the collect phase spends bringing the call log and screenshots home."""
    transcript_max_bytes: int = 16 * 1024 * 1024
    """A CLI's own transcript (images removed in the guest), where its event stream lacks the tool calls."""
    recording_max_bytes: int = 2 * 1024**3
    """The longest screen recording brought home (~5 h of a 1080p desktop)."""


EVIDENCE = EvidenceDefaults()
