"""The asset cache: paths, one download per miss (also under concurrency), offline misses, mirrors."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from hcu.osworld.osworld_bridge.assets import (
    STAND_IN_MARKER,
    AssetCache,
    AssetError,
    cache_path,
    holds_stand_ins,
)
from hcu.osworld.stand_ins.source import stand_in_cache

HF = "https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/os/t1/photo.jpg"


def test_cache_path_is_host_then_url_path(tmp_path: Path) -> None:
    assert cache_path(tmp_path, HF) == (
        tmp_path / "huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/os/t1/photo.jpg"
    )
    assert cache_path(tmp_path, "http://127.0.0.1:8000/a/b%20c.txt?download=true") == (
        tmp_path / "127.0.0.1_8000/a/b c.txt"
    )


@pytest.mark.parametrize(
    "url", ["ftp://host/file", "https://host/", "https://host/a/../../etc/passwd", "https:///nohost/x"]
)
def test_cache_path_refuses_urls_that_cannot_name_a_cache_file(tmp_path: Path, url: str) -> None:
    with pytest.raises(AssetError, match="asset url"):
        cache_path(tmp_path, url)


def test_local_paths_are_used_as_they_are(tmp_path: Path) -> None:
    local = tmp_path / "input.txt"
    local.write_text("x")
    assert AssetCache(root=tmp_path / "cache", offline=True).resolve(str(local)) == local
    assert not (tmp_path / "cache").exists()


def test_a_miss_is_downloaded_once_then_served_from_the_cache(tmp_path: Path, asset_server) -> None:
    asset_server.put(HF, b"jpeg bytes")
    cache = AssetCache(root=tmp_path / "cache", mirror=asset_server.url)
    first = cache.resolve(HF)
    assert first == cache_path(tmp_path / "cache", HF)
    assert first.read_bytes() == b"jpeg bytes"
    assert cache.resolve(HF) == first
    assert len(asset_server.requests) == 1
    assert [p.name for p in first.parent.iterdir()] == ["photo.jpg"]  # no temp file left beside it


def test_concurrent_misses_of_one_file_share_one_download(tmp_path: Path, asset_server) -> None:
    asset_server.put(HF, b"z" * (3 << 20))
    cache = AssetCache(root=tmp_path / "cache", mirror=asset_server.url)
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(cache.resolve(HF))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 6 and len(set(results)) == 1
    assert results[0].stat().st_size == 3 << 20
    assert len(asset_server.requests) == 1


def test_offline_miss_fails_with_one_line_naming_url_and_path_and_fetches_nothing(
    tmp_path: Path, asset_server
) -> None:
    asset_server.put(HF, b"jpeg bytes")
    cache = AssetCache(root=tmp_path / "cache", offline=True, mirror=asset_server.url)
    with pytest.raises(AssetError) as caught:
        cache.resolve(HF)
    message = str(caught.value)
    assert "\n" not in message
    assert HF in message and str(cache_path(tmp_path / "cache", HF)) in message
    assert asset_server.requests == []
    assert not cache_path(tmp_path / "cache", HF).exists()


def test_a_missing_remote_file_fails_and_leaves_no_partial_file(tmp_path: Path, asset_server) -> None:
    cache = AssetCache(root=tmp_path / "cache", mirror=asset_server.url)
    with pytest.raises(AssetError, match="404"):
        cache.resolve(HF)
    assert len(asset_server.requests) == 1  # a 4xx is not retried
    target = cache_path(tmp_path / "cache", HF)
    assert not target.exists()
    assert not target.parent.exists() or list(target.parent.iterdir()) == []


def test_mirror_comes_from_the_environment_unless_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HCU_ASSET_MIRROR", "http://127.0.0.1:9/")
    assert AssetCache.configured(tmp_path, offline=False).fetch_url(HF) == (
        "http://127.0.0.1:9/huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/os/t1/photo.jpg"
    )
    assert AssetCache.configured(tmp_path, offline=False, mirror="").fetch_url(HF) == HF


def test_stand_ins_of_another_generator_are_deleted_and_real_files_never(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hcu.osworld.stand_ins import source

    root = stand_in_cache(tmp_path / "stand-ins")
    made = cache_path(root, "https://example.org/d/report.xlsx")
    made.parent.mkdir(parents=True)
    made.write_bytes(b"a stand-in")
    assert stand_in_cache(root) == root and made.is_file()  # same generator: kept
    monkeypatch.setattr(source, "generator_hash", lambda: "changed")
    stand_in_cache(root)
    assert not made.exists() and holds_stand_ins(root)
    assert (root / STAND_IN_MARKER).read_text().endswith("generator changed\n")
