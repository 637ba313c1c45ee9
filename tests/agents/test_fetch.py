"""The fetch step on real npm and pip, from packages made here (an npm package folder and a wheel: neither needs
the network): what lands in the folder, the stamps, agents.json, a second run, a pin bump and a bad recipe."""

from __future__ import annotations

import base64
import hashlib
import shutil
import stat
import zipfile
from pathlib import Path

import orjson
import pytest

from hcu.osworld.agents.declaration import Artifact
from hcu.osworld.agents.fetch import FetchError, fetch_all
from hcu.record_io import sha256_of_file


def npm_package(folder: Path, version: str, tool: bytes) -> Path:
    (folder / "bin").mkdir(parents=True)
    (folder / "package.json").write_bytes(orjson.dumps({"name": "hcu-fake-cli", "version": version}))
    (folder / "bin" / "tool").write_bytes(tool)
    return folder


def wheel(folder: Path, version: str, tool: bytes) -> Path:
    """A minimal valid wheel holding `hcu_fake_cli/bin/tool`."""
    info = f"hcu_fake_cli-{version}.dist-info"
    files = {"hcu_fake_cli/bin/tool": tool,
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: hcu-fake-cli\nVersion: {version}\n".encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: hcu-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = [f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
              f"{len(data)}" for name, data in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,", ""]).encode()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"hcu_fake_cli-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


@pytest.fixture(autouse=True)
def own_npm_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert shutil.which("npm"), "npm is missing: run `make host`"
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))


def recipes(tmp_path: Path, version: str) -> list[Artifact]:
    package = npm_package(tmp_path / f"npm-{version}", version, f"tool {version}".encode())
    wheel_file = wheel(tmp_path / "wheels", version, f"wheel tool {version}".encode())
    return [Artifact(name="tool", source="npm", package=str(package), version=version, member="package/bin/tool"),
            Artifact(name="tool.tgz", source="npm", package=str(package), version=version,
                     member="package/package.json", keep_package=True, mode=0o644),
            Artifact(name="wheel-tool", source="pypi", package=str(wheel_file), version=version,
                     member="hcu_fake_cli/bin/tool")]


def test_declared_files_land_stamped_and_indexed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "artifacts"
    fetch_all(recipes(tmp_path, "1.0.0"), dest)
    assert (dest / "tool").read_bytes() == b"tool 1.0.0" and (dest / "wheel-tool").read_bytes() == b"wheel tool 1.0.0"
    assert stat.S_IMODE((dest / "tool").stat().st_mode) == 0o755
    assert {stat.S_IMODE((dest / name).stat().st_mode) for name in ("agents.json", ".tool.version")} == {0o644}
    kept = dest / "tool.tgz"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o644 and kept.read_bytes()[:2] == b"\x1f\x8b"  # gzip, as packed
    index = orjson.loads((dest / "agents.json").read_bytes())
    assert index["tool"] == {"version": "1.0.0", "sha256": sha256_of_file(dest / "tool"), "size": 10}
    assert set(index) == {"tool", "tool.tgz", "wheel-tool"}
    assert sorted(p.name for p in dest.iterdir()) == [".tool.tgz.version", ".tool.version", ".wheel-tool.version",
                                                       "agents.json", "tool", "tool.tgz", "wheel-tool"]
    assert "fetch-agents: tool 1.0.0" in capsys.readouterr().out


def test_a_second_run_fetches_nothing_and_a_pin_bump_fetches_again(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    dest, pinned = tmp_path / "artifacts", recipes(tmp_path, "1.0.0")
    fetch_all(pinned, dest)
    capsys.readouterr()
    fetch_all(pinned, dest)
    assert capsys.readouterr().out.splitlines() == [f"fetch-agents: wrote {dest / 'agents.json'}"]
    fetch_all(recipes(tmp_path, "1.0.1"), dest)
    assert (dest / "tool").read_bytes() == b"tool 1.0.1" and (dest / ".wheel-tool.version").read_text() == "1.0.1"
    assert orjson.loads((dest / "agents.json").read_bytes())["tool"]["version"] == "1.0.1"


@pytest.mark.parametrize("keep_package", [False, True])
def test_a_package_without_the_declared_file_installs_nothing(tmp_path: Path, keep_package: bool) -> None:
    package = npm_package(tmp_path / "npm", "1.0.0", b"tool")
    bad = Artifact(name="tool", source="npm", package=str(package), version="1.0.0", member="package/bin/nope",
                   keep_package=keep_package)
    dest = tmp_path / "artifacts"
    with pytest.raises(FetchError, match="hcu-fake-cli-1.0.0.tgz has no package/bin/nope"):
        fetch_all([bad], dest)
    assert list(dest.iterdir()) == []


def test_a_failed_download_names_the_command(tmp_path: Path) -> None:
    missing = Artifact(name="tool", source="pypi", package=str(tmp_path / "absent-1.0-py3-none-any.whl"),
                       version="1.0", member="x")
    with pytest.raises(FetchError, match=f"^pip download {missing.spec} failed \\(exit "):
        fetch_all([missing], tmp_path / "artifacts")
