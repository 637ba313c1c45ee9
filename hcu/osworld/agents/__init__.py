"""The agent CLIs hcu runs, registered once: an agent is its adapter module plus its line in ADAPTERS. Everything
else that knows about agents reads this registry: the settings' `AgentName`, the defaults of a run
(`agent_cli(name)`), isolation (`INHERITED_PATHS`, `MANAGED_CONFIG`) and the fetch step (`ARTIFACTS`)."""

from __future__ import annotations

from typing import Literal

from hcu.osworld.agents.base import SHELL_INHERITED_PATHS, AgentAdapter
from hcu.osworld.agents.claude_code import ClaudeCodeAdapter
from hcu.osworld.agents.codex import CodexAdapter
from hcu.osworld.agents.declaration import AgentCli, Artifact
from hcu.osworld.agents.gemini_cli import GeminiCliAdapter
from hcu.osworld.agents.grok_build import GrokBuildAdapter

ADAPTERS: dict[str, type[AgentAdapter]] = {adapter.cli.name: adapter for adapter in (
    CodexAdapter,
    ClaudeCodeAdapter,
    GeminiCliAdapter,
    GrokBuildAdapter,
)}
AGENT_NAMES: tuple[str, ...] = tuple(ADAPTERS)
AgentName = Literal[AGENT_NAMES]  # type: ignore[valid-type]  # made from the registry: a Literal at run time
"""A registered agent's name: pydantic refuses any other with the list of names."""

INHERITED_PATHS: tuple[str, ...] = tuple(sorted({*SHELL_INHERITED_PATHS, *(
    path for adapter in ADAPTERS.values() for path in adapter.cli.inherited_paths)}))
"""What steers any registered CLI, removed before every agent runs (a CLI also reads other CLIs' files)."""
MANAGED_CONFIG: tuple[str, ...] = tuple(sorted({path for adapter in ADAPTERS.values()
                                                 for path in adapter.cli.managed_config}))
ARTIFACTS: tuple[Artifact, ...] = tuple({artifact.name: artifact for adapter in ADAPTERS.values()
                                         for artifact in adapter.cli.artifacts}.values())
"""Every file an agent uploads, once, in registration order: what the fetch step puts into artifacts/."""


def agent_cli(name: str) -> AgentCli:
    """The declaration of a registered agent (its name already validated as an AgentName)."""
    return ADAPTERS[name].cli


def get_adapter(name: str) -> AgentAdapter:
    try:
        return ADAPTERS[name]()
    except KeyError:
        expected = ", ".join(AGENT_NAMES)
        raise ValueError(f"--agent: unknown agent {name!r}; expected one of {expected}") from None
