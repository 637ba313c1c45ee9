"""`python -m hcu.osworld.view`: bad flags and folders end in one line and exit 2; the export writes a page per
attempt (its file name holds the task id), the images it shows, and refuses folders it would clobber."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from hcu.osworld.view.__main__ import main
from hcu.osworld.view.export import MARKER
from tests.view.conftest import serve
from tests.view.sample_run import SampleRun


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        code = main(argv)
        raise SystemExit(code)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(("argv", "names"), [
    (["--port", "99999"], "--port"), (["--port", "eighty"], "--port"), (["--host", ""], "--host"),
    (["--colour", "red"], "unrecognized arguments"),
])
def test_bad_flags_end_in_one_line(capsys: pytest.CaptureFixture[str], sample: SampleRun, argv: list[str],
                                   names: str) -> None:
    assert names in one_line_error(capsys, [str(sample.run_dir), *argv])


def test_a_folder_that_is_not_a_run_ends_in_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                     sample: SampleRun) -> None:
    assert "not a run directory" in one_line_error(capsys, [str(tmp_path)])
    assert "not a directory" in one_line_error(capsys, [str(sample.run_dir), "--compare", str(tmp_path / "x")])


def test_a_port_in_use_ends_in_one_line(capsys: pytest.CaptureFixture[str], sample: SampleRun) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert "cannot listen on 127.0.0.1" in one_line_error(capsys, [str(sample.run_dir), "--port", str(port)])


def test_the_export_refuses_to_clobber(capsys: pytest.CaptureFixture[str], sample: SampleRun, tmp_path: Path) -> None:
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    assert "not an empty folder" in one_line_error(capsys, [str(sample.run_dir), "--export", str(foreign)])
    assert (foreign / "notes.txt").read_text() == "keep me"
    assert "overlaps the run directory" in one_line_error(
        capsys, [str(sample.run_dir), "--export", str(sample.run_dir / "site")])
    assert not (sample.run_dir / "site").exists()


def test_the_export_writes_a_page_per_attempt(capsys: pytest.CaptureFixture[str], sample: SampleRun,
                                              tmp_path: Path) -> None:
    out = tmp_path / "site"
    assert main([str(sample.run_dir), "--export", str(out)]) == 0
    assert "exported" in capsys.readouterr().out
    started = [a for a in sample.attempts if a.outcome != "no_result"]
    for attempt in sample.attempts:
        assert (out / "tasks" / f"{attempt.key}.html").is_file()
    first = started[0]
    assert (out / "files" / "tasks" / first.key / "steps" / "step-002.jpg").read_bytes() == \
        (sample.run_dir / "tasks" / first.key / "steps" / "step-002.jpg").read_bytes()
    assert (out / "static" / "viewer.js").is_file() and (out / MARKER).is_file()
    assert not (out / "compare.html").exists(), "no compare pages without --compare"
    assert main([str(sample.run_dir), "--export", str(out)]) == 0, "an earlier export is replaced"


def a_non_loopback_address() -> str:
    """This host's address on its default route (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
        except OSError as exc:
            raise AssertionError(f"this test needs a non-loopback IPv4 address on the host ({exc})") from None
        address = probe.getsockname()[0]
    assert not address.startswith("127."), f"the default route's address is loopback ({address})"
    return address


def test_the_viewer_listens_on_loopback_only(sample: SampleRun) -> None:
    with serve([str(sample.run_dir)]) as served:
        assert served.url.startswith("http://127.0.0.1:")
        port = int(served.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass
        with pytest.raises(OSError), socket.create_connection((a_non_loopback_address(), port), timeout=10):
            pass
