"""An attempt's final desktop kept beside its results: saved after settle, before the evaluator reads the guest, so
the state it scored can be scored again (regrade) or looked at (open_desktop) without running the agent again.

`keep_final_desktop`: none, zeros (kept unless the attempt scored above 0: zeros and withheld scores are the
ones a fixed evaluator or a person looks at again) or all; `keep_final_desktop_budget_gb` bounds what one run's
kept desktops take. The attempt's score never depends on any of it: a save that fails, a disk that fills or a
budget that is spent leave the desktop unkept and meta.json's `final_desktop` says why.

    <task folder>/final-desktop/     desktop.json (written last: a folder without it is torn, never used),
                                     state.zst + disk.qcow2 (+ below.qcow2: the snapshot disk it stands on) for a
                                     QEMU guest; a test desktop's files are the image desktop.json names

Every kept desktop is registered (`<state dir>/kept-desktops.json`, with the attempt's labels) before its folder
exists: `cleanup` removes torn ones always, kept ones only when asked (`--kept-desktops`).
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
from pathlib import Path

import docker.errors
import orjson
from pydantic import BaseModel

from hcu.defaults import GUEST_STATE, KeepFinalDesktop
from hcu.osworld.errors import HcuOSWorldError
from hcu.osworld.guest.docker_engine import docker_client, engine_calls
from hcu.osworld.guest.kinds import KEPT_IMAGE_REPOSITORY, KindName, SavedDesktop
from hcu.osworld.guest.lifecycle import Guest
from hcu.osworld.guest.state_dir import locked_table, state_dir
from hcu.osworld.osworld_bridge.tasks import TaskDefinition
from hcu.osworld.records.identity import LABEL_RUN_ID, AttemptId
from hcu.record_io import Record, read_record, write_record

FOLDER = "final-desktop"
DESKTOP_FILE = "desktop.json"
LEDGER = "kept-desktops.json"
LABEL_LEDGER = "hcu.kept_ledger"
"""On a kept desktop's image: the state dir whose ledger lists it (cleanup removes only its own unlisted ones)."""
GIB = 1 << 30


class KeptDesktop(Record):
    """desktop.json: a kept final desktop, what it holds, and what the evaluator was given when it was scored."""

    attempt_id: str
    task_id: str
    kind: KindName
    saved: SavedDesktop
    base_image: str | None = None
    """The image the kept disk's chain ends in (qemu), with its sha256: a regrade refuses a changed one."""
    base_sha256: str | None = None
    task_sha256: str
    """The task file it was scored against."""
    evaluator_sha256: str
    """Its evaluator section alone: what a regrade compares with the task file as it is now."""
    last_action: str | None
    """What the evaluator was told the agent's last action was (the infeasible check reads it)."""
    termination_reason: str | None
    """How the agent ended (a budget or timeout end scores 0 whatever the evaluator says)."""
    kept_at: float


class FinalDesktopRecord(BaseModel):
    """meta.json's `final_desktop`: whether the final desktop was kept, where and at what cost, or why not."""

    kept: bool
    path: str | None = None
    bytes: int | None = None
    save_sec: float | None = None
    """How long the guest was held to save it (added to the attempt)."""
    holds: list[str] = []
    lacks: list[str] = []
    reason: str | None = None
    """Why it was not kept."""


class LedgerEntry(BaseModel):
    folder: Path
    labels: dict[str, str]
    bytes: int = 0
    image: str | None = None


def evaluator_sha256(task: TaskDefinition) -> str:
    return hashlib.sha256(orjson.dumps(task.evaluator, option=orjson.OPT_SORT_KEYS)).hexdigest()


def save_dir(result_dir: Path, mode: KeepFinalDesktop, attempt: AttemptId) -> Path | None:
    """The folder a kept desktop goes into, registered and made empty (None when nothing is kept)."""
    if mode == "none":
        return None
    folder = result_dir / FOLDER
    with locked_table(LEDGER, LedgerEntry) as ledger:
        ledger[str(attempt)] = LedgerEntry(folder=folder.resolve(), labels=attempt.labels())
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def save(guest: Guest, folder: Path | None, mode: KeepFinalDesktop, budget_gb: float) -> SavedDesktop | str:
    """Save the guest's desktop into `folder`, or why not (the guest runs on either way)."""
    if folder is None:
        return f"keep_final_desktop is {mode}"
    spent = _spent(guest.attempt.run_id)
    if spent >= budget_gb * GIB:
        return f"past the run's budget: {spent / GIB:.2f} GiB kept of keep_final_desktop_budget_gb {budget_gb:g}"
    free = shutil.disk_usage(folder).free
    if free < GUEST_STATE.min_free_disk_gb * GIB:
        return f"only {free / GIB:.1f} GiB free on the results' disk"
    try:
        return guest.save_desktop(timeout_sec=GUEST_STATE.save_timeout_sec, labels={LABEL_LEDGER: str(state_dir())})
    except (HcuOSWorldError, OSError) as exc:  # a full disk among them: the attempt goes on unkept
        return f"saving failed: {exc}"


def finish(folder: Path | None, outcome: SavedDesktop | str | None, *, attempt: AttemptId, mode: KeepFinalDesktop,
           budget_gb: float, score: float | None, kept: KeptDesktop | None) -> FinalDesktopRecord:
    """After the evaluator: keep the saved desktop (desktop.json written last) or let it go, and say which.
    `kept` is its record; `score` the attempt's counted score (None: withheld)."""
    if mode == "none":
        return FinalDesktopRecord(kept=False, reason="keep_final_desktop is none")
    reason = outcome if isinstance(outcome, str) else None
    saved = outcome if isinstance(outcome, SavedDesktop) else None
    if saved is None and reason is None:
        reason = "the attempt ended before its desktop was saved"
    if saved is not None and mode == "zeros" and score is not None and score > 0:
        reason = f"scored {score:g} (keep_final_desktop zeros keeps the others)"
    if saved is not None and reason is None and folder is not None and kept is not None:
        with locked_table(LEDGER, LedgerEntry) as ledger:
            spent = sum(e.bytes for e in ledger.values() if e.labels.get(LABEL_RUN_ID) == attempt.run_id)
            if spent + saved.bytes <= budget_gb * GIB:
                ledger[str(attempt)] = LedgerEntry(folder=folder.resolve(), labels=attempt.labels(),
                                                   bytes=saved.bytes, image=saved.image)
                write_record(folder / DESKTOP_FILE, kept)
                return FinalDesktopRecord(kept=True, path=str(folder), bytes=saved.bytes, save_sec=saved.seconds,
                                          holds=saved.holds, lacks=saved.lacks)
        reason = (f"past the run's budget: {(spent + saved.bytes) / GIB:.2f} GiB with it, of "
                  f"keep_final_desktop_budget_gb {budget_gb:g}")
    discard(attempt)
    return FinalDesktopRecord(kept=False, reason=reason, save_sec=saved.seconds if saved else None)


def read(result_dir: Path) -> KeptDesktop | None:
    """The attempt's kept desktop, if it has a complete one."""
    path = result_dir / FOLDER / DESKTOP_FILE
    return read_record(path, KeptDesktop) if path.is_file() else None


def discard(attempt: AttemptId) -> None:
    """Remove what was saved of the attempt's desktop (its folder, a test desktop's image) and its entry."""
    with locked_table(LEDGER, LedgerEntry) as ledger:
        entry = ledger.pop(str(attempt), None)
    if entry is not None:
        _remove(entry)


def remove_matching(labels: dict[str, str], *, kept_too: bool) -> list[str]:
    """Torn kept desktops (no desktop.json) of attempts matching `labels`, and with `kept_too` the complete ones:
    what `cleanup` removes. Returns their folders."""
    with locked_table(LEDGER, LedgerEntry) as ledger:
        owners = [owner for owner, entry in ledger.items() if labels.items() <= entry.labels.items()
                  and (kept_too or not (entry.folder / DESKTOP_FILE).is_file())]
        entries = [ledger.pop(owner) for owner in owners]
    for entry in entries:
        _remove(entry)
    return [str(entry.folder) for entry in entries] + _remove_unlisted_images(labels)


def _remove_unlisted_images(labels: dict[str, str]) -> list[str]:
    """Images of kept test desktops matching `labels`, saved for this state dir's ledger, that it does not name (a
    save cut short)."""
    with locked_table(LEDGER, LedgerEntry) as ledger:
        listed = {entry.image for entry in ledger.values()}
    mine = {**labels, LABEL_LEDGER: str(state_dir())}
    filters = {"label": [f"{k}={v}" for k, v in mine.items()], "reference": KEPT_IMAGE_REPOSITORY}
    removed = []
    with engine_calls("kept desktop images"), contextlib.closing(docker_client()) as client:
        for image in client.images.list(filters=filters):
            if image.id not in listed:
                with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                    client.images.remove(image.id, force=True)
                    removed.append(image.id)
    return removed


def _spent(run_id: str) -> int:
    with locked_table(LEDGER, LedgerEntry) as ledger:
        return sum(entry.bytes for entry in ledger.values() if entry.labels.get(LABEL_RUN_ID) == run_id)


def _remove(entry: LedgerEntry) -> None:
    shutil.rmtree(entry.folder, ignore_errors=True)
    image = entry.image
    if image is None:
        return
    with engine_calls(f"removing kept desktop image {image}"), contextlib.closing(docker_client()) as client, \
            contextlib.suppress(docker.errors.NotFound):
        client.images.remove(image, force=True)

