"""The operator's hand on a running queue (`python -m hcu.osworld.ctl RUN_DIR pause|resume|drain|set KEY=VALUE`).

ctl drops a command file into RUN_DIR/control/ (a folder only its owner may enter) and waits for the answer. The
queue takes the commands at each poll, oldest first, applies each, logs it as an event in queue.jsonl and
writes an acknowledgement that ctl prints. A command is the queue's once it has removed the file: ctl that gives
up waiting removes it first, and then the queue never applies it (whoever removes the file decides).

- pause: no attempt starts until `resume`; running attempts run on. A pause outlives the queue.
- drain: no attempt starts; the queue exits once the running attempts have finished (a restart runs the rest).
- set KEY=VALUE: one of the keys a resume may change (CONTROL_KEYS, those the config model has), validated
  through the RunConfig model with every other key of the running config, effective at once.

What outlives the queue is control/state.json: the pause, and the values `set` gave with the config's value each
replaced. A restarted queue keeps a set value unless its config file changed that key since (the newer word wins).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import orjson
from filelock import FileLock, Timeout
from pydantic import ValidationError

from hcu.flags import describe_error
from hcu.osworld.errors import HcuOSWorldError
from hcu.osworld.run_config import RunConfig
from hcu.record_io import Record, read_record, write_record

CONTROL_DIR = "control"
STATE_FILE = "state.json"
LOCK_FILE = ".queue.lock"
"""The run lock (panel.run_lock): held by the queue running on the run directory, and only then."""
CONTROL_KEYS = ("max_active_tasks", "auto_max_active_tasks", "launch_stagger_seconds", "max_cost_usd")
"""Keys `set` may change: what a resumed run may change and an attempt already running does not depend on."""
Verb = Literal["pause", "resume", "drain", "set"]
VERBS: tuple[Verb, ...] = ("pause", "resume", "drain", "set")


class ControlError(HcuOSWorldError):
    """A command that cannot be applied; one line naming the key and what was expected."""


class Command(Record):
    id: str
    """Sortable by when it was sent: `<ns since epoch>-<pid>`."""
    verb: Verb
    key: str | None = None
    value: Any = None
    sent_at: float


class Ack(Record):
    id: str
    ok: bool
    message: str
    at: float


class ControlState(Record):
    """control/state.json: what a restarted queue keeps."""

    paused: bool = False
    settings: dict[str, Any] = {}
    """Values `set` gave, by key."""
    base: dict[str, Any] = {}
    """The config file's value of each settable key when the queue last started."""


def settable_keys() -> list[str]:
    return [key for key in CONTROL_KEYS if key in RunConfig.model_fields]


def parse_value(text: str) -> Any:
    """A command-line value: JSON where it is JSON (4, 2.5, null, true), else the text itself ("auto")."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def parse_setting(text: str) -> tuple[str, Any]:
    """`KEY=VALUE` -> (key, value); ControlError for a malformed one or a key `set` cannot change."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise ControlError(f"{text}: expected KEY=VALUE")
    if key not in settable_keys():
        raise ControlError(f"{key}: unknown key; expected one of {', '.join(settable_keys())}")
    return key, parse_value(raw)


def with_setting(config: RunConfig, key: str, value: Any) -> RunConfig:
    """`config` with `key` set to `value`, validated as a whole by the RunConfig model (ControlError if refused)."""
    if key not in settable_keys():
        raise ControlError(f"{key}: unknown key; expected one of {', '.join(settable_keys())}")
    try:
        return RunConfig.model_validate({**config.model_dump(mode="json"), key: value})
    except ValidationError as exc:
        raise ControlError(describe_error(exc)) from None


def settings_of(config: RunConfig) -> dict[str, Any]:
    dumped = config.model_dump(mode="json", include=set(settable_keys()))
    return {key: dumped.get(key) for key in settable_keys()}


def queue_running(run_dir: Path) -> bool:
    """True while a queue holds the run lock: the lock is taken for an instant and let go if it was free (a queue
    starting at that instant waits for it: resume.RUN_LOCK_WAIT_SEC)."""
    if not (run_dir / LOCK_FILE).exists():
        return False
    lock = FileLock(str(run_dir / LOCK_FILE), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        return True
    lock.release()
    return False


class ControlChannel:
    """The command and acknowledgement files in RUN_DIR/control/."""

    def __init__(self, run_dir: Path) -> None:
        self.dir = run_dir / CONTROL_DIR

    def open(self) -> None:
        self.dir.mkdir(mode=0o700, exist_ok=True)
        os.chmod(self.dir, 0o700)  # commands steer the run: only its owner may read or send them

    def _command(self, command_id: str) -> Path:
        return self.dir / f"{command_id}.cmd.json"

    def _ack(self, command_id: str) -> Path:
        return self.dir / f"{command_id}.ack.json"

    def submit(self, command: Command) -> None:
        write_record(self._command(command.id), command)

    def withdraw(self, command: Command) -> bool:
        """Take back a command the queue has not taken (True); False when the queue has it already."""
        try:
            self._command(command.id).unlink()
        except FileNotFoundError:
            return False
        return True

    def answer(self, command: Command) -> Ack | None:
        """The queue's acknowledgement, once (it is removed when read)."""
        path = self._ack(command.id)
        try:
            ack = read_record(path, Ack)
        except (FileNotFoundError, orjson.JSONDecodeError, ValidationError):
            return None
        path.unlink(missing_ok=True)
        return ack

    def take(self) -> list[Command | str]:
        """The commands sent since the last call, oldest first (a file that does not read: its name)."""
        taken: list[Command | str] = []
        for path in sorted(self.dir.glob("*.cmd.json")):
            try:
                command: Command | str = read_record(path, Command)
            except (FileNotFoundError, orjson.JSONDecodeError, ValidationError):
                command = path.name.removesuffix(".cmd.json")
            try:
                path.unlink()
            except FileNotFoundError:
                continue  # ctl withdrew it in the meantime
            taken.append(command)
        return taken

    def acknowledge(self, ack: Ack) -> None:
        write_record(self._ack(ack.id), ack)

    def clear(self) -> None:
        """Commands and answers a queue that is gone left (whoever sent them has given up waiting)."""
        for path in [*self.dir.glob("*.cmd.json"), *self.dir.glob("*.ack.json")]:
            path.unlink(missing_ok=True)

    def read_state(self) -> ControlState:
        try:
            return read_record(self.dir / STATE_FILE, ControlState)
        except (FileNotFoundError, orjson.JSONDecodeError, ValidationError):
            return ControlState()

    def write_state(self, state: ControlState) -> None:
        write_record(self.dir / STATE_FILE, state)


def running_config(run_dir: Path) -> RunConfig:
    """The config the queue on `run_dir` runs with: config.json and the values `set` gave."""
    path = run_dir / "config.json"
    try:
        config = RunConfig.model_validate(orjson.loads(path.read_bytes()))
    except FileNotFoundError:
        raise ControlError(f"{run_dir}: no config.json (not a run directory)") from None
    except (orjson.JSONDecodeError, ValidationError):
        raise ControlError(f"{path}: unreadable") from None
    for key, value in ControlChannel(run_dir).read_state().settings.items():
        config = with_setting(config, key, value)
    return config


class QueueControl:
    """The queue's side: the pause and drain it obeys, the settings it runs with, and the commands it takes."""

    def __init__(self, run_dir: Path, config: RunConfig) -> None:
        """`config`: the one the queue was started with; `self.config` adds what `set` gave and still holds."""
        self.channel = ControlChannel(run_dir)
        self.channel.open()
        self.channel.clear()
        stored, base = self.channel.read_state(), settings_of(config)
        self.kept: dict[str, Any] = {}
        self.dropped: list[str] = []
        for key, value in stored.settings.items():
            try:
                if key not in base or stored.base.get(key) != base[key]:
                    raise ControlError(f"{key}: the config changed it since")
                config = with_setting(config, key, value)
                self.kept[key] = value
            except ControlError as exc:
                self.dropped.append(str(exc))
        self.config, self.paused, self.draining = config, stored.paused, False
        self._state = ControlState(paused=stored.paused, settings=dict(self.kept), base=base)
        self.channel.write_state(self._state)

    def settings(self) -> dict[str, Any]:
        return settings_of(self.config)

    def set_keys(self) -> list[str]:
        """The keys whose value `set` gave."""
        return sorted(self._state.settings)

    def poll(self, emit: Callable[..., None], now: float, running: int) -> bool:
        """Take and apply the commands sent since the last poll, each an event (`emit`, the queue's) and an
        acknowledgement; True when there was one."""
        commands = self.channel.take()
        for command in commands:
            if isinstance(command, str):
                self.channel.acknowledge(Ack(id=command, ok=False, message="the command file does not read", at=now))
                continue
            try:
                said, ok = self.apply(command), True
            except ControlError as exc:
                said, ok = str(exc), False
            if ok and command.verb in ("pause", "drain"):
                said += f"; attempts still running: {running}"
            emit("control", command=command.verb, key=command.key, value=command.value, ok=ok, message=said,
                 id=command.id)
            self.channel.acknowledge(Ack(id=command.id, ok=ok, message=said, at=now))
        return bool(commands)

    def apply(self, command: Command) -> str:
        """Apply one command; returns what it did (one line); ControlError when it is refused."""
        if command.verb == "pause":
            self.paused = True
            said = "launches paused: no attempt starts until `ctl resume`"
        elif command.verb == "resume":
            self.paused = self.draining = False
            said = "launches resumed"
        elif command.verb == "drain":
            self.draining = True
            said = "draining: no attempt starts; the queue exits once the running attempts have finished"
        else:
            if command.key is None:
                raise ControlError("set: expected KEY=VALUE")
            previous = getattr(self.config, command.key, None)
            self.config = with_setting(self.config, command.key, command.value)
            self._state.settings[command.key] = getattr(self.config, command.key)
            said = f"{command.key}: {previous} -> {getattr(self.config, command.key)}"
        self._state.paused = self.paused
        self.channel.write_state(self._state)
        return said
