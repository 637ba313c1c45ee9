"""Credentials out of the evidence: the attempt's scope secret, the upstream credentials this process knows of
(the gateways' environment variables) and anything shaped like a provider key or a scope secret, wherever they
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
from hcu.gateway.scope_secret import SECRET_PREFIX
from hcu.osworld.records.layout import SCOPE_KEY_FILE

SHOWN_AS = "[redacted]"
CREDENTIAL_ENV = (
    "OSW_OPENAI_UPSTREAM_TOKEN", "OSW_ANTHROPIC_UPSTREAM_TOKEN", "OSW_GEMINI_UPSTREAM_TOKEN",
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "XAI_API_KEY",
    "AZURE_OPENAI_API_KEY", "AZURE_CLIENT_SECRET",
)
"""Where a runner or gateway on this host holds an upstream credential."""
KEY_SHAPES = re.compile(
    r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}"  # OpenAI, Anthropic
    r"|\bAIza[0-9A-Za-z_-]{35}"  # Google
    r"|\bxai-[A-Za-z0-9]{20,}"  # xAI
    r"|(?i:\bbearer\s+)[A-Za-z0-9._~+/-]{20,}=*"  # an Authorization header's value
    rf"|\b{re.escape(SECRET_PREFIX)}[0-9A-Fa-f]{{16,}}"  # a scope secret, whichever attempt's
)

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
