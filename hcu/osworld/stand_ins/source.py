"""The stand-in asset source: a marked cache of its own whose missing files are generated before setup and
evaluation read them (`prepare`), by generate.py in the OSWorld interpreter. The marker names the generator's
hash: what an older generator made is deleted, so a fixed generator is never masked by its old output."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

from filelock import FileLock

from hcu import REPO_ROOT
from hcu.osworld.osworld_bridge.assets import LOCKS_DIR, STAND_IN_MARKER, AssetCache, AssetError, holds_stand_ins
from hcu.osworld.osworld_bridge.process import child_env, resolve_python
from hcu.osworld.osworld_bridge.tasks import TaskDefinition
from hcu.osworld.stand_ins import plan

DEFAULT_STAND_IN_CACHE = REPO_ROOT / "assets-stand-ins"
GENERATOR = Path(__file__).parent
"""The code whose hash marks the cache: every module of this package."""
NOTE = ("Generated stand-ins for OSWorld task files (hcu --asset-stand-ins): for offline tests only.\n"
        "Never use this folder as a scored run's asset cache: run_queue and summarize refuse it.\n")
DEADLINE_SEC = 120.0
"""For generating one task's files (tens of milliseconds each, after the libraries' import)."""


def generator_hash() -> str:
    digest = hashlib.sha256()
    for module in sorted(GENERATOR.glob("*.py")):
        digest.update(module.name.encode() + b"\0" + module.read_bytes())
    return digest.hexdigest()[:16]


def stand_in_cache(root: Path | None) -> Path:
    """The stand-in cache at `root` (default assets-stand-ins/), marked with the generator that fills it; refuses
    a folder of real files."""
    root = Path(root) if root is not None else DEFAULT_STAND_IN_CACHE
    if root.is_dir() and not holds_stand_ins(root) and any(p.name != LOCKS_DIR for p in root.iterdir()):
        raise AssetError(f"asset_stand_ins: {root} holds real task files; give stand-ins a folder of their own "
                         f"(default {DEFAULT_STAND_IN_CACHE})")
    marker = NOTE + f"generator {generator_hash()}\n"
    (root / LOCKS_DIR).mkdir(parents=True, exist_ok=True)
    with FileLock(root / LOCKS_DIR / "stand-in-cache.lock"):
        if holds_stand_ins(root) and (root / STAND_IN_MARKER).read_text() == marker:
            return root
        for entry in root.iterdir():
            if entry.name not in (LOCKS_DIR, STAND_IN_MARKER):
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        (root / STAND_IN_MARKER).write_text(marker)
    return root


class StandInAssets(AssetCache):
    osworld_python: Path | None = None
    """The interpreter that generates (the OSWorld one: its libraries write the files its metrics read)."""

    @classmethod
    def at(cls, root: Path | None, osworld_python: Path | None) -> StandInAssets:
        return cls(root=stand_in_cache(root), offline=True, stand_ins=True, osworld_python=osworld_python)

    def prepare(self, task: TaskDefinition) -> None:
        """Generate the stand-ins the cache lacks for `task` (one process for all of them; two attempts that
        need the same task's files wait for one another)."""
        with FileLock(self.root / LOCKS_DIR / f"stand-ins-{task.id}.lock"):
            jobs = plan.missing(task, self.root)
            if not jobs:
                return
            python = resolve_python(self.osworld_python)
            try:
                subprocess.run([str(python), "-m", "hcu.osworld.stand_ins.generate"], input=json.dumps(jobs),
                               capture_output=True, text=True, env=child_env(), timeout=DEADLINE_SEC, check=True)
            except subprocess.TimeoutExpired:
                raise AssetError(f"making the stand-ins of task {task.id} exceeded {DEADLINE_SEC:g} s") from None
            except subprocess.CalledProcessError as exc:
                last = (exc.stderr or "").strip().splitlines()[-1:] or ["no output"]
                raise AssetError(f"making the stand-ins of task {task.id} failed: {last[0]}") from None
