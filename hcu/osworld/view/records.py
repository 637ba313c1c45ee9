"""A run's JSON records as the viewer reads them: through their models (config.json as `RunConfig`, manifest.json as
`Manifest`, an attempt's meta.json, attempt.json and retry.json as `AttemptMeta`, `AttemptLease` and `RetryNote`),
redacted first, as it reads summary.json. The keys a model does not know (another hcu's) are kept as they are; a
file that is there but does not read says why in one line; a missing file is no problem (an old run, or one in
progress, lacks some)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from hcu.flags import describe_error

M = TypeVar("M", bound=BaseModel)


@dataclass
class RecordFile(Generic[M]):
    """One record of the run as the viewer read it."""

    record: M | None
    """None when the file is missing or does not read."""
    unknown: dict[str, Any] = field(default_factory=dict)
    """Top-level keys the model does not know, redacted, as they are."""
    problem: str | None = None
    """Why a file that is there does not read (one line)."""

    def shown(self) -> dict[str, Any] | None:
        """The record as the file holds it: the model's fields it sets, then the keys the model does not know."""
        if self.record is None:
            return None
        return {**self.record.model_dump(mode="json", exclude_unset=True), **self.unknown}


def read_json_file(path: Path, name: str) -> tuple[Any, str | None] | None:
    """(the file's JSON value, None), or (None, why it does not read) naming it `name`; None when it is missing."""
    try:
        return orjson.loads(path.read_bytes()), None
    except FileNotFoundError:
        return None
    except OSError as exc:
        return None, f"{name}: cannot be read ({exc.strerror})"
    except orjson.JSONDecodeError as exc:
        return None, f"{name}: not JSON ({exc})"


def read_record_file(path: Path, model: type[M], redact: Callable[[Any], Any], name: str) -> RecordFile[M]:
    """`path` through `model`, its values passed through `redact` before the model sees them; `name` is how a
    problem names the file."""
    found = read_json_file(path, name)
    if found is None or found[1] is not None:
        return RecordFile(None, problem=found and found[1])
    value = found[0]
    if not isinstance(value, dict):
        return RecordFile(None, problem=f"{name}: expected a JSON object")
    value = redact(value)
    fields = model.model_fields
    unknown = {key: item for key, item in value.items() if key not in fields}
    try:
        return RecordFile(model.model_validate({key: item for key, item in value.items() if key in fields}), unknown)
    except ValidationError as exc:
        return RecordFile(None, unknown, problem=f"{name}: {describe_error(exc)}")
