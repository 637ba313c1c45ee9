"""Credentials out of the evidence: the attempt's scope secret, the upstream credentials this process knows of
(the providers' credential variables) and anything shaped like a provider key or a scope secret, wherever they
appear in what an attempt keeps (an agent can print its environment, type a key, or read one off the screen into
a tool result); an export also masks the run's scope key. Screenshots are pixels and cannot be cleaned: what the
screen showed stays in them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from hcu.gateway.credentials import MIN_SCRUBBED_LEN
from hcu.gateway.descriptors import PROVIDERS
from hcu.gateway.scope_secret import SECRET_PREFIX
from hcu.osworld.records.layout import SCOPE_KEY_FILE

SHOWN_AS = "[redacted]"
CREDENTIAL_ENV: tuple[str, ...] = tuple(name for provider in PROVIDERS.values() for name in provider.credential_env)
"""Where a runner or gateway on this host holds an upstream credential."""
BEARER_VALUE = r"(?i:\bbearer\s+)[A-Za-z0-9._~+/-]{20,}=*"
"""An Authorization header's value, whoever issued it."""
SCOPE_SECRET = rf"\b{re.escape(SECRET_PREFIX)}[0-9A-Fa-f]{{16,}}"
"""A scope secret, whichever attempt's."""
KEY_SHAPES = re.compile("|".join([*(shape for provider in PROVIDERS.values() for shape in provider.key_shapes),
                                  BEARER_VALUE, SCOPE_SECRET]))

M = TypeVar("M", bound=BaseModel)


class Redactor:
    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        known = [*secrets, *(os.environ.get(name) for name in CREDENTIAL_ENV)]
        # Longest first, so a secret that contains another is replaced whole.
        self.secrets = sorted({s.strip() for s in known if s and len(s.strip()) >= MIN_SCRUBBED_LEN},
                              key=len, reverse=True)

    @classmethod
    def for_run(cls, run_dir: Path) -> Redactor:
        """What an export of `run_dir` masks: this process's credentials and the run's scope key."""
        try:
            key = (run_dir / SCOPE_KEY_FILE).read_text().strip()  # the run's scope key: never exported, masked if seen
        except (OSError, UnicodeDecodeError):
            key = None
        return cls([key])

    def text(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, SHOWN_AS)
        return KEY_SHAPES.sub(SHOWN_AS, text)

    def data(self, data: bytes) -> bytes:
        """Raw files brought home (UTF-8 text; other bytes pass through untouched)."""
        return self.text(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.value(k): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value

    def model(self, record: M) -> M:
        return type(record).model_validate(self.value(record.model_dump(mode="json")))
