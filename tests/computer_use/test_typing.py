"""How `type` turns text into xdotool calls: ASCII in chunks, each newline a Return key press (a typed
newline does not submit a GTK dialog, e.g. Thunderbird's New Folder), runs of other characters through keycodes
bound to them (keymap.py)."""

from __future__ import annotations

import pytest

from hcu.computer_use import xinput


def test_newlines_are_key_presses_and_other_characters_go_through_bound_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(xinput, "xdotool", lambda *args, timeout=20.0: calls.append(args) or "")
    monkeypatch.setattr(xinput.keymap, "type_unmapped", lambda text: calls.append(("bound", text)))
    xinput.type_text("Bills\n\nnaïve ✓ 日本\n")
    assert [(c[0], c[-1]) for c in calls] == [
        ("type", "Bills"), ("key", "Return"), ("key", "Return"), ("type", "na"), ("bound", "ï"), ("type", "ve "),
        ("bound", "✓"), ("type", " "), ("bound", "日本"), ("key", "Return")]
