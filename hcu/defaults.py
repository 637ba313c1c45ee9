"""Every default hcu runs with: per benchmark version, for guests, setup, evidence and the gateways, and every
retry limit of the runner (`RETRIES`).

Registries read by the flags, the run config, the agent adapters, the guest, the gateways and the manifest alike,
so a default is written here once. What belongs to one agent CLI (its model, effort and files) is declared by its
adapter (`hcu.osworld.agents`), what belongs to one provider (its gateway's port and variables) by its descriptor
(`hcu.gateway.descriptors`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from tenacity import (
    Retrying,
    retry_if_exception,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)

from hcu import REPO_ROOT

BenchmarkVersion = Literal["v1", "v2"]

ASSET_CACHE_DIR = REPO_ROOT / "assets"
"""Where task files downloaded for setup and evaluation are cached (`asset_cache`)."""


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

GuestStart = Literal["snapshot", "cold"]
KeepFinalDesktop = Literal["none", "zeros", "all"]


class GuestStateDefaults(BaseModel):
    """Snapshot starts and kept final desktops (hcu.osworld.guest_state; docs/guests.md has the sizes)."""

    model_config = ConfigDict(frozen=True)

    guest_start: GuestStart = "snapshot"
    """A QEMU guest restores a ready snapshot of its configuration (built on first use) instead of booting; a guest
    that cannot is booted, and meta.json says why."""
    keep_final_desktop: KeepFinalDesktop = "zeros"
    """Keep the desktop of attempts that did not score (0, or withheld): the ones a fixed evaluator or a person
    looks at again."""
    keep_budget_gb: float = 100.0
    """Disk one run's kept desktops may take (a QEMU desktop of a 4G guest takes a few hundred MB)."""
    min_free_disk_gb: float = 5.0
    """No desktop or snapshot is saved onto a disk with less free space than this."""
    save_timeout_sec: float = 300.0
    """Longest a save (of a final desktop, or of a snapshot's warm-up) may hold the guest."""
    snapshot_dir: str = "snapshots"
    """The snapshot cache under the host's state dir (`snapshot_cache` moves it)."""
    screen_wait_sec: float = 120.0
    """How long open_desktop waits for a ready guest's screen to answer before it prints its address (the test
    desktop starts noVNC after readiness)."""


GUEST_STATE = GuestStateDefaults()


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
    placement_active_sec: float = 600.0
    """A task counts as active on its upstream, when new tasks are placed, while its last request is this recent:
    an attempt's calls come seconds to a minute apart, or up to `rate_limit_max_wait_sec` when one waits."""
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


class AdmissionDefaults(BaseModel):
    """The rule of `"max_active_tasks": "auto"` (hcu/osworld/quota/admission.py; docs/running.md, "Admission
    that follows the quota"). Shares are of the agent-phase time of the running attempts."""

    model_config = ConfigDict(frozen=True)

    start: int = Field(default=2, ge=1)
    """Where the limit starts without a forecast's safe concurrency (clamped to the ceiling)."""
    window_sec: float = Field(default=300.0, gt=0)
    """The recent window the shares are measured over (never reaching back before the last change)."""
    raise_below: float = Field(default=0.05, ge=0)
    """Raise only while less than this share of the attempts' time went to rate-limit waits; a lowering aims at it."""
    lower_above: float = Field(default=0.15, gt=0)
    """Lower when more than this share of the attempts' time went to rate-limit waits (about 12% of a guest's
    time, with the agent phase 80% of an attempt: machine time per result within 1.15x of an unthrottled one)."""
    raise_hold_sec: float = Field(default=300.0, ge=0)
    """No raise sooner than this after the last change: a new attempt's load takes minutes to show."""
    lower_hold_sec: float = Field(default=300.0, ge=0)
    """No lowering on waits sooner than this after the limit took effect: an attempt's demand grows over its
    minutes (its prompt carries every step), so a shorter window reads the few attempts in their late steps."""
    raise_fraction: float = Field(default=0.15, ge=0)
    """A raise adds this fraction of the limit, at least one attempt."""
    lower_factor: float = Field(default=0.5, gt=0, lt=1)
    """The deepest one lowering on waits goes: to the attempts the quota served over the window, at most to this
    fraction of the limit (at least one fewer)."""
    lower_headroom: float = Field(default=0.25, ge=0)
    """Lower on waits only while the upstreams' headroom averaged below this over the window (or is unknown):
    waits while an upstream still has room come from single attempts outrunning their own deployment, which fewer
    attempts do not shorten."""
    rate_limited_factor: float = Field(default=0.5, gt=0, lt=1)
    """An attempt that ended `upstream_rate_limit` multiplies the limit by this (at least one fewer)."""
    busy_share: float = Field(default=0.75, gt=0)
    """Raise only when the attempts in their agent phase averaged at least this share of the limit over the window
    (the limit is actually reached, not held below by memory, node slots, or nothing left to launch)."""
    min_headroom: float = Field(default=0.1, ge=0)
    """Raise only when the upstreams' headroom averaged at least this over the window (where the gateways saw
    their limits)."""
    sample_sec: float = Field(default=5.0, gt=0)
    """The gateways are read at most this often."""
    observe_sec: float = Field(default=60.0, gt=0)
    """Without a quota in the config, how often the forecast reads the limits the upstreams state (whatever the
    admission)."""


ADMISSION = AdmissionDefaults()


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
    clock_readings: int = 3
    """Readings of the guest's clock at collect; the one with the shortest round trip places its tool calls."""


EVIDENCE = EvidenceDefaults()


class Backoff(BaseModel):
    """How one kind of call is tried again: at most `tries` tries, the first wait `first_wait_sec`, each next one
    twice as long up to `max_wait_sec`; with `total_sec`, no new try once that much time has passed."""

    model_config = ConfigDict(frozen=True)

    tries: int = Field(ge=1)
    first_wait_sec: float = Field(gt=0)
    max_wait_sec: float = Field(gt=0)
    total_sec: float | None = None

    def retrying(self, retry: Callable[[BaseException], bool] | None = None) -> Retrying:
        """The tenacity policy of this backoff, retrying what `retry` accepts (default: any exception); the last
        error is raised as it is."""
        stop = stop_after_attempt(self.tries)
        return Retrying(
            stop=stop if self.total_sec is None else stop | stop_after_delay(self.total_sec),
            wait=wait_exponential(multiplier=self.first_wait_sec, max=self.max_wait_sec),
            retry=retry_if_exception(retry) if retry is not None else retry_if_exception_type(),
            reraise=True,
        )


class RetryDefaults(BaseModel):
    """Every retry limit the runner uses, in one record: each place that tries something again reads its own
    field here (the gateway's own limits are `GATEWAY`'s)."""

    model_config = ConfigDict(frozen=True)

    attempts: int = Field(default=4, ge=1)
    """Attempts of one repeat of a task: the first plus at most three infrastructure retries (the queue's, and the
    canary sweep's per invocation). Retrying is free before the agent's first action; after it, a retry is a new
    attempt under retries/."""
    rate_limit_resumes: int = Field(default=2, ge=0)
    """Session resumes after an agent turn that ended on a rate limit; a turn that still ends on one ends the
    attempt as `upstream_rate_limit`, which the queue retries."""
    guest_api: Backoff = Backoff(tries=3, first_wait_sec=0.25, max_wait_sec=2.0)
    """One call into the guest's API: a read after a transient failure (connection error, timeout, 502/503/504),
    a command only when it provably never left this host."""
    guest_sudo_settle_sec: float = Field(default=60.0, ge=0)
    """How long a booting guest's sudo is tried again, once a second, when it fails for another reason than a
    refused password (an API that answers before the rest of the guest is up)."""
    asset_download: Backoff = Backoff(tries=3, first_wait_sec=1.0, max_wait_sec=10.0)
    """One download into the asset cache, after a connection error, a timeout or a 5xx answer."""
    chrome_cdp: Backoff = Backoff(tries=8, first_wait_sec=0.5, max_wait_sec=8.0, total_sec=30.0)
    """OSWorld's connection to the guest's Chrome over CDP, in a patched OSWorld checkout: a Chrome still starting
    is waited for instead of OSWorld launching a second browser."""

    @property
    def policy(self) -> str:
        """How a score relates to retries, as manifest.json and summary.json state it."""
        return (f"infrastructure failures rerun the task, at most {self.attempts} attempts; the one attempt left in "
                "tasks/ is scored (never a best-of or mean); retries/ are kept and never scored")


RETRIES = RetryDefaults()
