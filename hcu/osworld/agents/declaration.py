"""What an adapter declares about its CLI, read by everything else that needs to know about agents: the run's
settings (the agent's name, model, effort and gateway), isolation (the configuration it would inherit), the
manifest (the files it uploads) and the fetch step (where those files come from)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hcu.gateway.descriptors import ProviderDescriptor


@dataclass(frozen=True)
class Artifact:
    """One file in artifacts/ an agent uploads, and how the fetch step (`make agents`) gets it from npm or PyPI,
    pinned and without running any install script."""

    name: str
    """Its file name in artifacts/ (and in agents.json)."""
    source: Literal["npm", "pypi"]
    """npm: `npm pack --ignore-scripts`; pypi: `pip download` of a binary wheel."""
    package: str
    """What npm or pip is asked for, `{version}` standing for the version."""
    version: str
    """The pinned version: a new one is fetched again, and agents.json records it."""
    member: str
    """The file inside the package (the tarball or wheel): what lands in artifacts/, or, with `keep_package`, what
    the package must contain."""
    keep_package: bool = False
    """Keep npm's packed tarball as it is (unpacked in the guest) instead of the one member."""
    mode: int = 0o755

    @property
    def spec(self) -> str:
        return self.package.format(version=self.version)


@dataclass(frozen=True)
class AgentCli:
    """One agent CLI, as its adapter declares it."""

    name: str
    """How runs, settings, result folders and trajectories name the agent."""
    provider: ProviderDescriptor
    """The gateway its CLI talks to."""
    model: str
    """The model when a run names none."""
    effort: str
    """The reasoning effort when a run names none."""
    artifacts: tuple[Artifact, ...]
    """What the agent uploads; the first is the CLI itself (a run's agent_binary replaces it)."""
    inherited_paths: tuple[str, ...]
    """Names, relative to the guest user's home and the agent's working directory, of files and folders the CLI
    reads on its own (configuration, memory, instructions): removed before every agent runs, whichever it is."""
    managed_config: tuple[str, ...] = ()
    """System-wide configuration folders the CLI reads (under /etc), removed the same way."""

    @property
    def gateway_port(self) -> int:
        """The gateway's port on the Docker bridge when a run names no gateway: its provider's."""
        return self.provider.default_port
