"""record_io.GrowingFile: an append-only log read as it grows, a torn last line left for the next read, and a file
replaced or cut read again from its start."""

from __future__ import annotations

from pathlib import Path

from hcu.record_io import GrowingFile


def test_a_growing_file_is_read_by_its_complete_lines(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    reader = GrowingFile(path)
    assert reader.read() == (False, b""), "no file yet: nothing added"
    path.write_bytes(b"a\nb\nhalf")
    assert reader.read() == (True, b"a\nb\n"), "new to the reader; the torn last line waits"
    with path.open("ab") as f:
        f.write(b"-done\nc\n")
    assert reader.read() == (False, b"half-done\nc\n")
    assert reader.read() == (False, b"")


def test_a_replaced_or_cut_file_is_read_again_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"a\nb\n")
    reader = GrowingFile(path)
    reader.read()
    path.write_bytes(b"x\n")  # cut in place
    assert reader.read() == (True, b"x\n")
    other = tmp_path / "other.jsonl"
    other.write_bytes(b"y\nz\n")
    other.replace(path)  # another file at the path, no shorter
    assert reader.read() == (True, b"y\nz\n")
