"""Secrets never reach a page: every text the viewer shows or serves passes through `Redactor.text`.

What is masked: the run's scope key (the exact contents of its key file), every scope secret (`hcu1-` and an
HMAC, whatever scope it belongs to), and what looks like a credential in logs and records: provider API keys,
bearer tokens, JWTs, and the value of any `...token`, `...secret`, `...password` or `...api_key` field.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

from hcu.gateway.scope_secret import SECRET_PREFIX

SHOWN_AS = "[redacted]"
PATTERNS = (
    re.escape(SECRET_PREFIX) + r"[0-9a-fA-F]{16,}",  # a scope secret
    r"\bsk-[A-Za-z0-9_\-]{16,}",  # OpenAI and Anthropic keys (sk-..., sk-ant-..., sk-proj-...)
    r"\bAIza[0-9A-Za-z_\-]{30,}",  # Google API keys
    r"\bxai-[A-Za-z0-9_\-]{20,}",
    r"\bgh[pousr]_[A-Za-z0-9]{20,}",
    r"\bAKIA[0-9A-Z]{16}\b",
    r"\beyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}",  # a JWT (Entra ID tokens)
)
BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=\-]{8,}")
KEY_VALUE = re.compile(
    r"(?i)(\b[\w\-]*(?:api[_\-]?key|secret|token|password|passwd|credential)[\"']?\s*[:=]\s*[\"']?)"
    r"([^\s\"',}{\]\[]+)")
"""`"upstream_token": "..."`, `API_KEY=...`, `x-api-key: ...`: the value goes, the name stays readable."""
SECRET_NAME = re.compile(r"(?i)(api[_\-]?key|secret|token|password|passwd|credential|authorization)$")
"""A JSON field whose value is a secret by its name."""


NOT_SECRETS = frozenset({"null", "none", "true", "false"})


def _masked_value(match: re.Match[str]) -> str:
    value = match.group(2)
    return match.group(0) if value.lower() in NOT_SECRETS else match.group(1) + SHOWN_AS


class Redactor:
    def __init__(self, exact: list[str]) -> None:
        self._exact = sorted({value for value in exact if len(value) >= 8}, key=len, reverse=True)
        self._pattern = re.compile("|".join(PATTERNS))

    @classmethod
    def for_run(cls, run_dir: Path, key_files: list[Path]) -> Redactor:
        """A redactor that knows the run's own key (its key file in the run directory and the one its config
        names): read only to be masked."""
        exact = []
        for path in {run_dir / "gateway-scope.key", *key_files}:
            try:
                exact.append(path.read_text().strip())
            except (OSError, UnicodeDecodeError):
                continue
        return cls(exact)

    def text(self, value: str) -> str:
        for secret in self._exact:
            value = value.replace(secret, SHOWN_AS)
        value = self._pattern.sub(SHOWN_AS, value)
        value = BEARER.sub(lambda m: m.group(1) + SHOWN_AS, value)
        return KEY_VALUE.sub(_masked_value, value)

    def bytes(self, data: bytes) -> bytes:
        return self.text(data.decode("utf-8", "replace")).encode()

    def value(self, value: Any) -> Any:
        """A copy of a parsed JSON value with every string redacted and every secret-named field masked (the
        text patterns alone could break JSON: `"token": 5`)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, dict):
            return {key: SHOWN_AS if _secret_field(key, item) else self.value(item) for key, item in value.items()}
        return value

    def json_text(self, data: bytes) -> bytes:
        """A JSON or JSONL file's bytes, redacted value by value (lines that are not JSON, as text)."""
        try:
            return orjson.dumps(self.value(orjson.loads(data)), option=orjson.OPT_INDENT_2)
        except orjson.JSONDecodeError:
            pass
        lines = []
        for line in data.splitlines():
            try:
                lines.append(orjson.dumps(self.value(orjson.loads(line))))
            except orjson.JSONDecodeError:
                lines.append(self.bytes(line))
        return b"\n".join(lines) + b"\n"


def _secret_field(key: object, value: Any) -> bool:
    return isinstance(key, str) and bool(SECRET_NAME.search(key)) and isinstance(value, str) \
        and value.lower() not in NOT_SECRETS and value != SHOWN_AS
