"""How `type` turns text into xdotool calls: ASCII in chunks, each newline a Return key press (a typed
newline does not submit a GTK dialog, e.g. Thunderbird's New Folder), each non-ASCII character alone."""

from __future__ import annotations

import pytest

from hcu.computer_use import xinput


def test_newlines_are_key_presses_and_non_ascii_goes_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(xinput, "xdotool", lambda *args, timeout=20.0: calls.append(args) or "")
    monkeypatch.setattr(xinput.time, "sleep", lambda _seconds: None)
    xinput.type_text("Bills\n\nnaïve\n")
    assert [(c[0], c[-1]) for c in calls] == [
        ("type", "Bills"), ("key", "Return"), ("key", "Return"), ("type", "na"), ("type", "ï"), ("type", "ve"),
        ("key", "Return")]
