"""The message a guest API answer carries, as one short line (standard library only: hcu's process and the
OSWorld process both read guest answers with it).

The official in-guest server answers a failure with JSON (`{"status": "error", "message": ...}`,
`{"error": ...}`) or with plain text ("Failed to find window for ..."); a command's own output never counts
as the message of a success.
"""

from __future__ import annotations

import json

MESSAGE_LIMIT = 300
"""Characters of a guest message kept in an error line."""


def answer_message(text: str, secret: str = "") -> str:
    """The `message` (or `error`) of a JSON answer, else the answer's text: one line, at most MESSAGE_LIMIT
    characters, with `secret` (the client password) masked."""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict):
        found = next((body[key] for key in ("message", "error") if isinstance(body.get(key), str) and body[key]),
                     None)
        text = found if found is not None else ""
    line = " ".join(text.split())
    if secret:
        line = line.replace(secret, "***")
    return line if len(line) <= MESSAGE_LIMIT else line[: MESSAGE_LIMIT - 3] + "..."
