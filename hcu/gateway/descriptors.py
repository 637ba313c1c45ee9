"""What the rest of hcu knows about each provider, written once: how its gateway is started, where that gateway
finds its upstream credential and endpoint, which host variables and key shapes are its credentials, and which
token kinds it bills. Its gateway module (`openai_proxy`, ...) reads the same descriptor; node gateways, the
scripted stand-in, the run's price check and the evidence redactor read nothing else about a provider.

A provider is its gateway module plus one descriptor here, registered in PROVIDERS. This module imports nothing
heavier than the standard library, so reading a descriptor never starts a gateway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit


@dataclass(frozen=True)
class ProviderDescriptor:
    name: str
    """How settings, token-log rows and adapters name the provider."""
    title: str
    """The provider's name in messages."""
    module: str
    """The gateway's module: `python -m <module>` starts it."""
    default_port: int
    """The gateway's port on the Docker bridge when a run names no gateway."""
    port_flag: Literal["--port", "--ports"]
    """How the gateway takes its listening port (OpenAI's serves several ports from one state)."""
    token_env: str
    """The variable the gateway reads the upstream credential from (never a flag: a command line is public)."""
    base_env: str
    """The variable naming the upstream's base URL; empty where upstreams are flags (`upstream_flags`)."""
    sdk_key_env: str
    """The variable the provider's own SDKs and CLIs read their key from: a credential when a host holds it,
    the gateway's token when a CLI in the guest reads it."""
    default_base: str | None = None
    """The upstream when `base_env` is unset; None: `base_env` is required."""
    upstream_flags: tuple[str, ...] = ()
    """For a gateway whose upstreams are flags: the flags naming one plain upstream at `{netloc}` over
    `{scheme}` (a stand-in or relay on this host)."""
    other_credential_env: tuple[str, ...] = ()
    """Further host variables that hold this provider's credentials (Azure's key and client secret, ...)."""
    key_shapes: tuple[str, ...] = ()
    """Regular expressions of the provider's keys, for redacting a key wherever it shows up."""
    bills_cache_writes: bool = False
    """Its usage reports cache writes, billed apart from input (so a price needs a cache-write rate)."""

    @property
    def credential_env(self) -> tuple[str, ...]:
        """Every variable through which a host may hold this provider's credentials."""
        return (self.token_env, self.sdk_key_env, *self.other_credential_env)

    def upstream_at(self, base_url: str, token: str) -> tuple[list[str], dict[str, str]]:
        """The flags and environment that point this provider's gateway at `base_url` (`scheme://host:port`)
        with `token` as the upstream credential."""
        if self.base_env:
            return [], {self.base_env: base_url, self.token_env: token}
        parts = urlsplit(base_url)
        flags = [flag.format(netloc=parts.netloc, scheme=parts.scheme) for flag in self.upstream_flags]
        return flags, {self.token_env: token}


OPENAI = ProviderDescriptor(
    name="openai", title="OpenAI", module="hcu.gateway.openai_proxy", default_port=8611, port_flag="--ports",
    token_env="OSW_OPENAI_UPSTREAM_TOKEN", base_env="",
    upstream_flags=("--upstreams", "{netloc}", "--upstream-kind", "openai", "--upstream-scheme", "{scheme}"),
    sdk_key_env="OPENAI_API_KEY", other_credential_env=("AZURE_OPENAI_API_KEY", "AZURE_CLIENT_SECRET", "XAI_API_KEY"),
    # OpenAI's (and any OpenAI-compatible upstream's: xAI's) keys
    key_shapes=(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}", r"\bxai-[A-Za-z0-9]{20,}"),
)
ANTHROPIC = ProviderDescriptor(
    name="anthropic", title="Anthropic", module="hcu.gateway.anthropic_proxy", default_port=8537, port_flag="--port",
    token_env="OSW_ANTHROPIC_UPSTREAM_TOKEN", base_env="OSW_ANTHROPIC_UPSTREAM_BASE",
    sdk_key_env="ANTHROPIC_API_KEY", key_shapes=(r"\bsk-ant-[A-Za-z0-9_-]{20,}",), bills_cache_writes=True,
)
GEMINI = ProviderDescriptor(
    name="gemini", title="Gemini", module="hcu.gateway.gemini_proxy", default_port=8571, port_flag="--port",
    token_env="OSW_GEMINI_UPSTREAM_TOKEN", base_env="OSW_GEMINI_UPSTREAM_BASE",
    default_base="https://generativelanguage.googleapis.com",
    sdk_key_env="GEMINI_API_KEY", other_credential_env=("GOOGLE_API_KEY",), key_shapes=(r"\bAIza[0-9A-Za-z_-]{35}",),
)

PROVIDERS: dict[str, ProviderDescriptor] = {provider.name: provider for provider in (OPENAI, ANTHROPIC, GEMINI)}
"""Every provider by name: a new one is registered here."""
