"""hcu's official guest path end to end on a real VM: `run_task --guest-image` and `setup_canary --guest-image`
on the QEMU stand-in, with the real Codex CLI, the real gateway and OSWorld's evaluator; only the model is a
scripted policy. Nothing here special-cases the stand-in: it is named by `--guest-docker-image`."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from hcu import REPO_ROOT
from hcu.demo.stand_in import scripted_stack
from hcu.osworld.attempt.meta import AttemptMeta
from hcu.osworld.guest.docker_engine import docker_client
from hcu.osworld.records.result import TaskResult
from hcu.record_io import read_record, sha256_of_file
from tests.guest.conftest import QEMU_RUNNER_IMAGE
from tests.run_task.conftest import RENAME_MATCH, RENAME_TASK, TASKS_DIR, policy
from tests.session import unique_run_id

pytestmark = [pytest.mark.docker, pytest.mark.kvm, pytest.mark.artifacts, pytest.mark.timeout(1800)]

PHASES = ["load", "boot", "isolate", "upload", "probe", "setup", "agent", "settle", "save desktop", "evaluate",
          "collect", "cleanup"]
RENAME = [  # a look at the VM's screen, then the rename through the code channel (no GUI timing under TCG)
    {"tool": "screenshot", "arguments": {"max_width": 640}},
    {"tool": "run_shell", "arguments": {"command": "mv ~/Desktop/todo_list_Jan_1 ~/Desktop/todo_list_Jan_2"}},
]
GUEST_FLAGS = ["--guest-docker-image", QEMU_RUNNER_IMAGE, "--ram-size", "2G"]


def labelled(run_id: str) -> list[str]:
    selector = {"label": ["hcu.managed=1", f"hcu.run_id={run_id}"]}
    with contextlib.closing(docker_client()) as client:
        return ([c.name for c in client.containers.list(all=True, filters=selector)]
                + [v.name for v in client.volumes.list(filters=selector)])


def console_tail(record: dict) -> str:
    """The VM's serial console when its boot failed (meta.json's guest, or a canary report), for the failure."""
    path = record.get("console_log") or (record.get("guest") or {}).get("console_log")
    return f"\n--- the VM's console ({path}):\n" + Path(path).read_text()[-4000:] if path else ""


def test_run_task_on_the_qemu_guest_scores_one_and_leaves_the_base_untouched(
    qemu_guest_disk: Path, tmp_path: Path
) -> None:
    before = sha256_of_file(qemu_guest_disk)
    policies, token_log, result_dir = tmp_path / "policies.json", tmp_path / "tokens.jsonl", tmp_path / "result"
    policies.write_bytes(orjson.dumps({"policies": {"rename": policy(RENAME_MATCH, RENAME)}}))
    run_id = unique_run_id("qemu-e2e")
    with scripted_stack("codex", policies, token_log=token_log, max_model_calls=20,
                        log_dir=tmp_path / "logs") as stack:
        done = subprocess.run(
            [sys.executable, "-m", "hcu.osworld.run_task", "--task-id", RENAME_TASK, "--task-domain", "os",
             "--tasks-dir", str(TASKS_DIR), "--guest-image", str(qemu_guest_disk), *GUEST_FLAGS,
             "--agent", "codex", "--code-mode", "--max-model-calls", "20", "--token-log", str(token_log),
             "--gateway", stack.gateway_url, "--result-dir", str(result_dir), "--run-id", run_id,
             "--timeout-seconds", "900", "--no-progress-seconds", "300", "--offline-assets"],
            capture_output=True, text=True, timeout=1800, cwd=REPO_ROOT)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:] + console_tail(orjson.loads((result_dir / "meta.json").read_bytes()))
    r = read_record(result_dir / "result.json", TaskResult)
    assert (r.status, r.score, r.termination_reason, r.protocol_word) == (
        "completed", 1.0, "completed", "TASK_COMPLETE"), log[-3000:]
    assert [p.name for p in r.phases] == PHASES and all(p.status == "ok" for p in r.phases)
    guest = read_record(result_dir / "meta.json", AttemptMeta).guest
    assert guest is not None and guest.spec is not None and guest.container_image is not None
    assert guest.spec.kind == "qemu" and guest.spec.docker_image == QEMU_RUNNER_IMAGE
    assert guest.container_image.reference == QEMU_RUNNER_IMAGE
    assert guest.container_image.id.startswith("sha256:")
    steps = {step.name: step for step in guest.readiness}
    assert steps["api answers"].ok and steps["desktop painted"].ok
    assert all(step.duration_sec >= 0 for step in steps.values())
    grown = re.search(r"-> ([\d.]+) GiB \(volume_size 64 GiB\)$", steps["filesystem grown"].detail or "")
    assert steps["filesystem grown"].ok and grown, steps["filesystem grown"]
    assert 62.5 <= float(grown[1]) <= 64, "the root filesystem fills the disk, less ext4's own overhead"
    assert list((result_dir / ".guest").glob("*.qcow2")) == [], "the attempt's overlay outlived it"
    assert labelled(run_id) == []
    assert sha256_of_file(qemu_guest_disk) == before, "the base image was written"


def test_setup_canary_on_the_qemu_guest_passes(qemu_guest_disk: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hcu.osworld.setup_canary", "--benchmark-version", "v1", "--task-id", RENAME_TASK,
         "--tasks-dir", str(TASKS_DIR), "--guest-image", str(qemu_guest_disk), *GUEST_FLAGS,
         "--result-dir", str(tmp_path / "r"), "--run-evaluator", "--offline-assets"],
        capture_output=True, text=True, timeout=1200, cwd=REPO_ROOT)
    report = orjson.loads((tmp_path / "r" / "report.json").read_bytes())
    assert done.returncode == 0 and report["status"] == "passed", (
        (report.get("error") or done.stderr[-3000:]) + console_tail(report))
    assert (report["guest_kind"], report["guest_image"], report["volume_size_gb"]) == (
        "qemu", str(qemu_guest_disk), 64)
    assert [s["name"] for s in report["readiness"]][-1] == "filesystem grown"
    assert all(s["ok"] for s in report["readiness"])
    assert all(s["ok"] for s in report["setup_steps"]) and report["evaluator"]["score"] == 0.0
    assert list((tmp_path / "r" / "work").glob("*.qcow2")) == []
