"""Characters the keyboard map lacks (é, ✓, 日), typed through spare keycodes bound to them and left bound.

xdotool binds one scratch keycode per character and reverts it right after the key's release. GTK looks the
keycode up in the server's map when it reads the event, so an application that reads the press after the
revert (a loaded machine) gets no character: the text loses letters. Here a character's binding stays, and a
keycode is bound to another character only when every spare one is taken, least recently used first: by then
the application has read its last press. Only a call typing more distinct characters than there are spare
keycodes (18 on Xvfb's default map) rebinds ones it pressed itself, and pauses before it does, once per round."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from mcp.server.mcpserver.exceptions import ToolError
from Xlib import X, error
from Xlib.display import Display
from Xlib.ext import xtest

REBIND_PAUSE_SEC = 0.5
"""Before the keycodes pressed in the same call are bound to other characters: the application's time to read
them (0.1 s lost and reordered characters in GTK on a loaded machine; 0.6 s did not)."""


def keysym_of(char: str) -> int:
    """X's keysym for a character: Latin-1 keysyms are the code point, every other one 0x01000000 + it."""
    code = ord(char)
    return code if 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF else 0x01000000 | code


class SpareKeys:
    """One X connection and this process's bindings of spare keycodes (keysym -> keycode, least recent first)."""

    def __init__(self, display: Display) -> None:
        self.display = display
        first = display.display.info.min_keycode
        mapping = display.get_keyboard_mapping(first, display.display.info.max_keycode - first + 1)
        self.present = {syms[0]: first + index for index, syms in enumerate(mapping) if syms and syms[0]}
        """Keysyms the map already types without a modifier (a binding an earlier server process left, too)."""
        self.free = [first + index for index, syms in enumerate(mapping) if not any(syms)][1:]
        """Spare keycodes, highest taken first; the lowest stays xdotool's scratch key (a `key` combo naming a
        keysym the map lacks)."""
        self.bound: OrderedDict[int, int] = OrderedDict()

    def type(self, text: str) -> None:
        pressed: set[int] = set()
        for char in text:
            keycode = self._keycode(keysym_of(char), pressed)
            xtest.fake_input(self.display, X.KeyPress, keycode)
            xtest.fake_input(self.display, X.KeyRelease, keycode)
            self.display.sync()
            pressed.add(keycode)

    def _keycode(self, keysym: int, pressed: set[int]) -> int:
        if keysym in self.bound:
            self.bound.move_to_end(keysym)
            return self.bound[keysym]
        if keysym in self.present:
            return self.present[keysym]
        if self.free:
            keycode = self.free.pop()
        elif self.bound:
            _, keycode = self.bound.popitem(last=False)
            if keycode in pressed:  # every spare keycode was pressed in this call: one pause, then all are free
                time.sleep(REBIND_PAUSE_SEC)
                pressed.clear()
        else:
            raise ToolError(f"type: the keyboard map has no spare keycode to type {chr(keysym & 0xFFFFFF)!r}")
        self.display.change_keyboard_mapping(keycode, [(keysym, keysym)])  # shifted or not: the same character
        self.bound[keysym] = keycode
        return keycode


_lock = threading.Lock()
_keys: SpareKeys | None = None


def type_unmapped(text: str) -> None:
    """Type `text` (characters without a key on the current map) on $DISPLAY."""
    global _keys
    with _lock:
        try:
            if _keys is None:
                _keys = SpareKeys(Display())
            _keys.type(text)
        except (error.DisplayError, error.ConnectionClosedError, OSError) as exc:
            _keys = None  # a display that went away is opened again on the next call
            raise ToolError(f"type: the X display did not answer ({type(exc).__name__}: {exc})") from None
