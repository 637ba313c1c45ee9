"""Pointer and keyboard input through xdotool on $DISPLAY (screen pixel coordinates)."""

from __future__ import annotations

import shutil
import subprocess
import time

from mcp.server.mcpserver.exceptions import ToolError

from . import keymap

BUTTONS = {"left": 1, "middle": 2, "right": 3}
SCROLL_BUTTONS = {"up": 4, "down": 5, "left": 6, "right": 7}
MODIFIERS = {"ctrl": "ctrl", "control": "ctrl", "shift": "shift", "alt": "alt", "super": "super",
             "meta": "super"}
TYPE_CHUNK = 50
"""Characters per `xdotool type` call: long strings in one call drop characters on slow X servers."""
TYPE_DELAY_MS = 12
MAX_REMAPPED_CHARS = 1500
"""Non-ASCII characters per `type` call; longer text should go through set_text."""
DRAG_STEP_SEC = 0.1
"""Pause between drag steps; without it X applications see no motion between press and release."""


def xdotool(*args: str, timeout: float = 20.0) -> str:
    """Run one xdotool command; its complaints (exit status or 'No such key name') become tool errors."""
    exe = shutil.which("xdotool")
    if exe is None:
        raise ToolError("xdotool is not installed in the guest (needed for pointer and keyboard input)")
    try:
        proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ToolError(f"xdotool {args[0]} did not finish within {timeout:g} s") from None
    problem = proc.stderr.strip()
    if proc.returncode != 0 or "No such key name" in problem:
        raise ToolError(f"xdotool {args[0]} failed: {problem or f'exit status {proc.returncode}'}")
    return proc.stdout


def modifier_names(modifiers: list[str]) -> list[str]:
    names = []
    for modifier in modifiers:
        key = MODIFIERS.get(modifier.strip().lower())
        if key is None:
            raise ToolError(f"modifiers: unknown modifier {modifier!r}; expected some of {sorted(MODIFIERS)}")
        names.append(key)
    return names


def button_number(button: str) -> str:
    if button not in BUTTONS:
        raise ToolError(f"button: expected one of {sorted(BUTTONS)}, got {button!r}")
    return str(BUTTONS[button])


def click(x: int, y: int, button: str, count: int, modifiers: list[str]) -> None:
    mods = modifier_names(modifiers)
    args = ["mousemove", str(x), str(y)]
    for mod in mods:
        args += ["keydown", mod]
    args += ["click", "--repeat", str(count), "--delay", "80", button_number(button)]
    for mod in reversed(mods):
        args += ["keyup", mod]
    xdotool(*args)


def move(x: int, y: int) -> None:
    xdotool("mousemove", str(x), str(y))


def drag(path: list[tuple[int, int]], button: str) -> None:
    number = button_number(button)
    (x0, y0), rest = path[0], path[1:]
    args = ["mousemove", str(x0), str(y0), "sleep", str(DRAG_STEP_SEC), "mousedown", number]
    for x, y in rest:
        args += ["sleep", str(DRAG_STEP_SEC), "mousemove", str(x), str(y)]
    args += ["sleep", str(DRAG_STEP_SEC), "mouseup", number]
    xdotool(*args)


def press(button: str, down: bool) -> None:
    xdotool("mousedown" if down else "mouseup", button_number(button))


def scroll(direction: str, amount: int) -> None:
    xdotool("click", "--repeat", str(amount), "--delay", "30", str(SCROLL_BUTTONS[direction]))


def cursor_position() -> tuple[int, int]:
    fields = dict(part.split(":", 1) for part in xdotool("getmouselocation").split() if ":" in part)
    return int(fields["x"]), int(fields["y"])


def display_size() -> tuple[int, int]:
    width, height = xdotool("getdisplaygeometry").split()
    return int(width), int(height)


def type_text(text: str) -> None:
    """Type ASCII in chunks through xdotool, newlines as Return, and every other character through keycodes
    bound to it (keymap.py)."""
    remapped = sum(not char.isascii() for char in text)
    if remapped > MAX_REMAPPED_CHARS:
        raise ToolError(f"type: {remapped} non-ASCII characters exceed {MAX_REMAPPED_CHARS} per call; "
                        "split the text or use set_text on the field")
    for start, end in _runs(text):
        piece = text[start:end]
        if piece == "\n":  # a key press: a typed newline is not a Return to every widget (GTK dialogs ignore it)
            xdotool("key", "Return")
        elif piece.isascii():
            for offset in range(0, len(piece), TYPE_CHUNK):
                chunk = piece[offset : offset + TYPE_CHUNK]
                xdotool("type", "--delay", str(TYPE_DELAY_MS), "--", chunk, timeout=10 + len(chunk) * 0.1)
        else:
            keymap.type_unmapped(piece)


def _runs(text: str) -> list[tuple[int, int]]:
    """Spans of text: maximal runs of ASCII and of other characters, and each newline on its own."""
    kinds = ["\n" if char == "\n" else char.isascii() for char in text]
    spans: list[tuple[int, int]] = []
    start = 0
    for index in range(1, len(text) + 1):
        if index == len(text) or kinds[index] != kinds[start] or kinds[index] == "\n":
            spans.append((start, index))
            start = index
    return spans


def check_combo(combo: str) -> str:
    parts = combo.strip().split("+")
    if not combo.strip() or any(not part.strip() for part in parts) or " " in combo.strip():
        raise ToolError(f"keys: expected an xdotool combo such as 'ctrl+s' or 'Return', got {combo!r}")
    return combo.strip()


def key(combos: list[str], repeat: int) -> None:
    checked = [check_combo(combo) for combo in combos]
    for _ in range(repeat):
        xdotool("key", "--clearmodifiers", "--delay", "30", *checked)


def hold_key(keys: list[str], seconds: float) -> None:
    checked = [check_combo(k) for k in keys]
    xdotool("keydown", *checked)
    try:
        time.sleep(seconds)
    finally:
        xdotool("keyup", *reversed(checked))
