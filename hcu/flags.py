"""Command-line flags derived from pydantic settings: a field `max_model_calls` is the flag `--max-model-calls`,
its attribute docstring the flag's help, its default and constraints the flag's. The runner's commands and the
gateways build their parsers here, so a setting exists once, as a field.
"""

from __future__ import annotations

import argparse
import types
from collections.abc import Callable, Collection, Sequence
from typing import Any, Literal, NoReturn, TypeVar, Union, get_args, get_origin

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

M = TypeVar("M", bound=BaseModel)


class Settings(BaseModel):
    """Settings read from flags or a config file: unknown keys refused, attribute docstrings as help."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def _members(annotation: Any) -> tuple[Any, ...]:
    if get_origin(annotation) in (Union, types.UnionType):
        return get_args(annotation)
    return (annotation,)


def _kind(annotation: Any) -> str:
    members = _members(annotation)
    if annotation is bool:
        return "switch"
    if any(get_origin(m) is dict for m in members):
        return "json"  # a mapping travels as one JSON argument (`--prices '{"model": {...}}'`)
    if any(get_origin(m) is list for m in members):
        return "list"
    if any(get_origin(m) is Literal and True in get_args(m) for m in members):
        return "optional_value"  # `--test-desktop` alone, or `--test-desktop IMAGE`
    return "value"


def add_flags(parser: argparse.ArgumentParser, model: type[BaseModel]) -> None:
    """One flag per field of `model`; unset flags stay out of the parsed values, so field defaults apply."""
    for name, field in model.model_fields.items():
        kind, help_text = _kind(field.annotation), " ".join((field.description or "").split()) or None
        required = field.is_required() and kind != "switch"
        if kind == "switch":
            parser.add_argument(flag_name(name), action="store_true", default=None, help=help_text)
        elif kind == "optional_value":
            parser.add_argument(flag_name(name), nargs="?", const=True, default=None, metavar="VALUE",
                                help=help_text)
        elif kind == "list":
            parser.add_argument(flag_name(name), default=None, metavar="A,B", help=help_text,
                                type=lambda text: [part.strip() for part in text.split(",") if part.strip()])
        elif kind == "json":
            parser.add_argument(flag_name(name), default=None, metavar="JSON", help=help_text, type=_json_object)
        else:
            parser.add_argument(flag_name(name), default=None, required=required, help=help_text)


def to_flags(settings: BaseModel, model: type[BaseModel], only: Collection[str] | None = None) -> list[str]:
    """The command line that `parse_flags(model, ...)` turns back into `settings`' values for `model`'s fields (those
    in `only`, when given)."""
    argv: list[str] = []
    for name, field in model.model_fields.items():
        value = getattr(settings, name)
        if value is None or value is False or (only is not None and name not in only):
            continue
        if value is True:
            argv.append(flag_name(name))
        elif _kind(field.annotation) == "list":
            argv += [flag_name(name), ",".join(str(item) for item in value)]
        elif _kind(field.annotation) == "json":
            argv += [flag_name(name), orjson.dumps(settings.model_dump(mode="json", include={name})[name]).decode()]
        else:
            argv += [flag_name(name), str(value)]
    return argv


def _json_object(text: str) -> dict:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise argparse.ArgumentTypeError("expected a JSON object") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return value


class OneLineParser(argparse.ArgumentParser):
    """Bad flags end in one line and exit 2, without the usage dump."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_flags(model: type[M], argv: Sequence[str] | None, parser: argparse.ArgumentParser) -> M:
    """Parse `argv` with `parser` (its flags from `add_flags(parser, model)`) into a validated `model`."""
    values = {key: value for key, value in vars(parser.parse_args(argv)).items() if value is not None}
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        parser.error(describe_error(exc, flag_name))


def describe_error(error: ValidationError, name: Callable[[str], str] = str) -> str:
    """The first validation error as one line: which key (or flag, through `name`) and what was expected."""
    first = error.errors()[0]
    loc = first["loc"]
    where = name(str(loc[0])) + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc[1:]) if loc else ""
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    kind = first["type"]
    if kind == "extra_forbidden":
        return f"{where}: unknown key{more}"
    if kind == "missing":
        return f"{where}: missing (required){more}"
    if kind == "model_type":
        return f"{where or 'config'}: expected a JSON object{more}"
    message = first["msg"].removeprefix("Value error, ")
    key, _, rest = message.partition(": ")
    if not loc and rest and key.isidentifier():  # a model-level check names its key at the start
        message = f"{name(key)}: {rest}"
    got = "" if not loc else f" (got {orjson.dumps(first['input'], default=str).decode()[:60]})"
    return f"{where + ': ' if where else ''}{message}{got}{more}"
