"""broad handlers catch only what they expect. A missing or wrong prerequisite (KVM, an
image, a binary, an artifact, a task file, an asset an offline cache lacks, an image smaller than volume_size)
is a `configuration` failure: not retried, and run_task exits 2. A bug in hcu stays `runner`, never `guest`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hcu import REPO_ROOT
from hcu.osworld.attempt.failures import translate
from hcu.osworld.attempt.meta import AttemptMeta
from hcu.osworld.errors import BootTimeout, ConfigurationError, GuestError, policy_for
from hcu.osworld.guest.api import GuestAPIError
from hcu.osworld.guest.host import HOST_PROC_ENV
from hcu.osworld.guest.lifecycle import GuestSpec, start_guest
from hcu.osworld.guest.readiness import Readiness
from hcu.osworld.osworld_bridge.assets import AssetCache
from hcu.osworld.osworld_bridge.process import OSWorldProcess
from hcu.osworld.osworld_bridge.setup import SetupStepError, run_steps
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.records.result import TaskResult
from hcu.record_io import read_record
from tests.failures.conftest import StartFn, labelled_containers
from tests.run_task.conftest import RENAME_TASK, TASKS_DIR
from tests.session import unique_run_id


def run_task(tmp_path: Path, *args: str) -> tuple[TaskResult, int, str]:
    result_dir = tmp_path / "result"
    proc = subprocess.run(
        [sys.executable, "-m", "hcu.osworld.run_task", "--task-domain", "os", "--tasks-dir", str(TASKS_DIR),
         "--test-desktop", "--agent", "codex", "--gateway", "http://127.0.0.1:9", "--result-dir", str(result_dir),
         "--run-id", unique_run_id("config"), *args], capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    return read_record(result_dir / "result.json", TaskResult), proc.returncode, proc.stdout + proc.stderr


def assert_configuration(result: TaskResult, code: int, log: str, words: str) -> None:
    assert (result.status, result.failure_classification, result.score) == ("error", "configuration", None), log
    assert words in result.failure_message, result.failure_message
    assert code == 2, "run_task exits non-zero; 2 for a configuration error"
    assert not policy_for("configuration").retry and policy_for("configuration").stop_queue


def test_a_missing_task_file_is_a_configuration_error(tmp_path: Path) -> None:
    result, code, log = run_task(tmp_path, "--task-id", "no-such-task")
    assert_configuration(result, code, log, "task os/no-such-task not found")
    assert [p.name for p in result.phases if p.status == "failed"] == ["load"]
    meta = read_record(tmp_path / "result" / "meta.json", AttemptMeta)
    assert meta.trajectory is not None and not meta.trajectory.written and "load" in meta.trajectory.why_not
    assert not (tmp_path / "result" / "trajectory.json").exists(), "meta.json says there is none"


@pytest.mark.osworld
def test_a_missing_agent_binary_is_a_configuration_error(tmp_path: Path) -> None:
    result, code, log = run_task(tmp_path, "--task-id", RENAME_TASK, "--agent-binary", str(tmp_path / "codex"))
    assert_configuration(result, code, log, f"agent artifacts missing: {tmp_path / 'codex'}")


@pytest.mark.docker
@pytest.mark.artifacts
@pytest.mark.osworld
def test_a_missing_guest_image_is_a_configuration_error(start_task: StartFn) -> None:
    task = start_task(RENAME_TASK, gateway="http://127.0.0.1:9",
                      extra_args=["--test-desktop", "hcu-test-desktop:no-such-tag"])
    result, code = task.finish()
    assert_configuration(result, code, task.log(), "build it with `make test-desktop`")
    assert [p.name for p in result.phases if p.status == "failed"] == ["boot"]
    assert labelled_containers(result.run_id) == []


@pytest.mark.docker
def test_missing_kvm_is_a_configuration_error(make_qcow2, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The official image (not pulled here) needs KVM: a host whose CPU shows no vmx/svm flag refuses it before
    any pull (the host's cpuinfo read from $HCU_HOST_PROC, pointed at one without them)."""
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cpuinfo").write_text("processor\t: 0\nflags\t\t: fpu vme de pse tsc hypervisor\n\n")
    monkeypatch.setenv(HOST_PROC_ENV, str(proc))
    spec = GuestSpec(kind="qemu", image=str(make_qcow2("guest.qcow2", "1G")), volume_size_gb=1)
    attempt = AttemptId(run_id=unique_run_id("nokvm"), task_id="t", attempt=1)
    with pytest.raises(ConfigurationError, match=r"^KVM: .*: the official guest needs KVM"):
        start_guest(spec, attempt, work_dir=tmp_path / "work")
    assert labelled_containers(attempt.run_id) == []


@pytest.fixture
def make_qcow2(tmp_path: Path):
    def make(name: str, size: str) -> Path:
        path = tmp_path / name
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(path), size], check=True, timeout=30)
        return path

    return make


def test_readiness_relabels_only_guest_failures() -> None:
    """A guest that does not answer is a guest failure; a bug in hcu's own code passes through as itself."""
    steps = Readiness("g")
    with pytest.raises(GuestError, match="readiness step 'api answers' failed"), steps.step("api answers"):
        raise GuestAPIError("/screenshot", None, "no answer (ConnectionError)")
    with pytest.raises(TypeError, match="a bug"), steps.step("desktop painted"):
        raise TypeError("a bug")
    with pytest.raises(ConfigurationError), steps.step("image checked"):
        raise ConfigurationError("image x not found")
    with pytest.raises(BootTimeout), steps.step("sudo works"):
        raise BootTimeout("phase boot overran its timeout of 900 s")
    assert [(s.name, s.ok) for s in steps.steps] == [("api answers", False), ("desktop painted", False),
                                                    ("image checked", False), ("sudo works", False)]
    assert steps.steps[-1].error == "BootTimeout: phase boot overran its timeout of 900 s", "where a boot stopped"
    assert not policy_for("runner").retry, "a bug in hcu is not retried as infrastructure"


def test_an_asset_missing_from_an_offline_cache_is_a_configuration_error(tmp_path: Path) -> None:
    step = {"type": "download", "parameters": {"files": [{"url": "https://example.com/in.xlsx",
                                                          "path": "/home/user/in.xlsx"}]}}
    never_started = OSWorldProcess(Path(sys.executable), work_dir=tmp_path / "process")  # the miss comes first
    with pytest.raises(SetupStepError) as missed:
        run_steps(never_started, [step], password="pw", cache_dir=tmp_path,
                  assets=AssetCache(root=tmp_path / "assets", offline=True), step_deadline_sec=10)
    assert translate(missed.value, "setup").classification == "configuration"
    assert translate(missed.value, "evaluator").classification == "configuration", "in a postconfig step too"
    assert "offline_assets forbids downloading" in str(missed.value)
