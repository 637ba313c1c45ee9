"""manifest.json: everything a run's number depends on that the config does not already say.

Written when a run starts; each later start (a resume) is appended to `starts`. The pins (task files and the
guest image) must not change under a run: a resume that finds them changed is refused, because the
results on disk would no longer describe one setup.
"""

from __future__ import annotations

import contextlib
import hashlib
import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import requests

from hcu import REPO_ROOT
from hcu.osworld.agents import agent_cli
from hcu.osworld.errors import HcuOSWorldError, PhaseError
from hcu.osworld.guest.container_image import resolve
from hcu.osworld.guest.docker_engine import docker_client
from hcu.osworld.osworld_bridge.process import OSWorldCodeError
from hcu.osworld.records.lease import current_host
from hcu.osworld.records.manifest import (
    Artifacts,
    ContainerImageIdentity,
    DockerImageIdentity,
    FileIdentity,
    GatewayAnswer,
    GitRevision,
    Manifest,
    NodeInfo,
    OSWorldCode,
    OSWorldRevision,
    Start,
    TaskIdentity,
)
from hcu.osworld.run_config import RunConfig, TaskSpec
from hcu.record_io import file_sha256, write_record

# What the manifest records as an `error` instead of an identity: an input it cannot look up here.
_UNKNOWABLE = (PhaseError, OSWorldCodeError)

HEALTHZ_TIMEOUT_SEC = 5.0
GIT_TIMEOUT_SEC = 10.0


class ManifestMismatch(HcuOSWorldError):
    """A pinned input changed since the run started."""


def sha256_of_json(value: object) -> str:
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _file_identity(path: Path | None, cache_path: Path) -> FileIdentity:
    if path is None:
        return FileIdentity(path=None)
    if not path.is_file():
        return FileIdentity(path=str(path), error="not a file")
    return FileIdentity(path=str(path), size=path.stat().st_size, sha256=file_sha256(path, cache_path))


def _git(repo: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_SEC, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_revision(repo: Path) -> GitRevision:
    """HEAD of the checkout holding `repo`; a folder that is only inside hcu's own checkout (a venv's
    site-packages, say) has no revision of its own."""
    top = _git(repo, "rev-parse", "--show-toplevel")
    if top is None or (Path(top).resolve() == REPO_ROOT.resolve() and repo.resolve() != REPO_ROOT.resolve()):
        return GitRevision(path=str(repo), error="not a git checkout")
    return GitRevision(path=str(repo), commit=_git(repo, "rev-parse", "HEAD"),
                       dirty=bool(_git(repo, "status", "--porcelain")))


def task_identity(config: RunConfig, task: TaskSpec) -> TaskIdentity:
    """The task definition the runner will load (its own lookup), by path and sha256."""
    from hcu.osworld.osworld_bridge.tasks import load_task

    try:
        found = load_task(config.benchmark_version, task.id, config.domain_of(task), config.tasks_dir,
                          config.osworld_python)
    except _UNKNOWABLE as exc:
        return TaskIdentity(error=str(exc))
    return TaskIdentity(path=str(found.source_path), sha256=found.sha256)


def task_file_hashes(config: RunConfig) -> dict[str, TaskIdentity]:
    """Every task's identity. The checkout's V1 folder is looked up once (it asks an OSWorld process, ~0.1 s:
    per task, a 1,107-task campaign waited two minutes before its first launch)."""
    from hcu.osworld.osworld_bridge.tasks import default_v1_tasks_dir

    if config.benchmark_version == "v1" and config.tasks_dir is None:
        try:
            config = config.model_copy(update={"tasks_dir": default_v1_tasks_dir(config.osworld_python)})
        except _UNKNOWABLE as exc:
            return {task.id: TaskIdentity(error=str(exc)) for task in config.tasks}
    return {task.id: task_identity(config, task) for task in config.tasks}


def guest_identity(config: RunConfig, cache_path: Path) -> FileIdentity | ContainerImageIdentity:
    if config.guest_image is not None:
        return _file_identity(config.guest_image, cache_path)
    image = str(config.test_desktop_image)
    try:
        with contextlib.closing(docker_client(HEALTHZ_TIMEOUT_SEC)) as client:
            found = client.images.get(image)
    except Exception as exc:  # a missing image or engine is recorded, not fatal: the runner will say more
        return ContainerImageIdentity(container_image=image, error=type(exc).__name__)
    return ContainerImageIdentity(container_image=image, id=found.id, repo_digests=found.attrs.get("RepoDigests", []))


def docker_image_identity(config: RunConfig) -> DockerImageIdentity | None:
    """The QEMU container image as this host has it (id, registry digest), or why not (the first attempt pulls an
    absent image); None for the test desktop."""
    if config.guest_image is None:
        return None
    try:
        with contextlib.closing(docker_client(HEALTHZ_TIMEOUT_SEC)) as client:
            return DockerImageIdentity(**resolve(client, config.guest_docker_image, pull=False).model_dump())
    except Exception as exc:  # recorded, not fatal: the guest start reports it in full
        return DockerImageIdentity(reference=config.guest_docker_image, error=type(exc).__name__)


def agent_files(config: RunConfig) -> dict[str, Path]:
    """Every artifact the agent uploads (the CLI from agent_binary, the rest from artifact_dir)."""
    assert config.artifact_dir is not None and config.agent_binary is not None
    cli, *others = (artifact.name for artifact in agent_cli(config.agent).artifacts)
    return {cli: config.agent_binary, **{name: config.artifact_dir / name for name in others}}


def artifact_identities(config: RunConfig, cache_path: Path) -> Artifacts:
    assert config.artifact_dir is not None
    agents_json = config.artifact_dir / "agents.json"
    guide = Path(config.instructions_file) if config.instructions_file else None
    return Artifacts(
        agents_json=orjson.loads(agents_json.read_bytes()) if agents_json.is_file() else None,
        agent={name: _file_identity(path, cache_path) for name, path in agent_files(config).items()},
        computer_use=_file_identity(config.mcp_binary, cache_path),
        instructions_file=_file_identity(guide, cache_path),
        base_instructions_file=_file_identity(config.base_instructions_file, cache_path),
    )


def gateway_health(gateway: str | None) -> GatewayAnswer:
    """The gateway's /healthz answer, or the error that stopped us getting it."""
    if gateway is None:
        return GatewayAnswer(per_node="each Ray node starts the run's gateway on its own bridge")
    url = f"{gateway}/healthz"
    try:
        response = requests.get(url, timeout=HEALTHZ_TIMEOUT_SEC)
    except requests.RequestException as exc:
        return GatewayAnswer(url=url, error=type(exc).__name__)
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text[:500]
    return GatewayAnswer(url=url, status=response.status_code, body=body)


def osworld_revision(config: RunConfig) -> OSWorldRevision:
    """The OSWorld code the runner uses (its interpreter, the checkout revision or the installed desktop-env
    version, as the OSWorld process reports them) and the tasks folder's revision when it is a checkout."""
    from hcu.osworld.osworld_bridge.process import osworld_identity

    try:
        identity = osworld_identity(config.osworld_python)
        code = OSWorldCode(**git_revision(Path(identity["checkout_root"])).model_dump(), python=identity["python"],
                           python_version=identity["python_version"],
                           desktop_env_version=identity["desktop_env_version"])
    except _UNKNOWABLE as exc:
        code = OSWorldCode(error=str(exc))
    tasks = git_revision(config.tasks_dir) if config.tasks_dir else None
    return OSWorldRevision(code=code, tasks_dir=tasks)


def build_manifest(config: RunConfig) -> Manifest:
    assert config.results_dir is not None and config.run_id is not None
    cache_path = config.results_dir / ".sha256-cache.json"
    return Manifest(run_id=config.run_id, config_sha256=sha256_of_json(config.comparable()),
                    task_files=task_file_hashes(config), osworld_revision=osworld_revision(config),
                    guest_image=guest_identity(config, cache_path),
                    artifacts=artifact_identities(config, cache_path),
                    guest_docker_image=docker_image_identity(config))


def record_start(config: RunConfig) -> Manifest:
    """Write manifest.json for a new run, or append this start to a resumed one after checking its pins."""
    path = config.run_dir / "manifest.json"
    current = build_manifest(config)
    if path.exists():
        previous = Manifest.model_validate(orjson.loads(path.read_bytes()))
        if previous.guest_docker_image is not None and previous.guest_docker_image.id is None:
            previous.guest_docker_image = current.guest_docker_image  # pulled since the run started: pin it now
        changed = [key for key, value in current.pins().items() if previous.pins()[key] != value]
        if changed:
            raise ManifestMismatch(f"{', '.join(changed)} changed since this run started; use a new run_id")
        current = previous
    current.starts.append(Start(at=time.time(), host=current_host(), hcu_commit=git_revision(REPO_ROOT),
                                gateway_health=gateway_health(config.gateway)))
    write_record(path, current)
    return current


def record_nodes(run_dir: Path, attempt_nodes: dict[str, str], nodes: dict[str, NodeInfo]) -> None:
    """Add where attempts ran to manifest.json (the queue holds the run lock, so it is the only writer)."""
    path = run_dir / "manifest.json"
    manifest = Manifest.model_validate(orjson.loads(path.read_bytes()))
    manifest.attempt_nodes.update(attempt_nodes)
    manifest.nodes.update({name: nodes[name] for name in set(attempt_nodes.values()) if name in nodes})
    write_record(path, manifest)
