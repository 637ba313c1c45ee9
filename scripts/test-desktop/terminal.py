#!/usr/bin/python3
"""A VTE terminal window titled "Terminal" (the test desktop's gnome-terminal).

It registers on AT-SPI as "gnome-terminal-server" like GNOME's terminal, so its text is readable
through the accessibility tree (the official guest's /terminal endpoint works the same way).
usage: terminal.py [--title TITLE] [--working-directory=DIR] [-- COMMAND ARGS...]   (default: "Terminal"
running the user's shell in $HOME). Called as `gnome-terminal` it returns at once and leaves the window
running, as GNOME's client does once its server opened the window (tasks run it through /setup/execute,
which would otherwise wait for the window to close).
"""

from __future__ import annotations

import os
import sys


def detach_when_called_as_client() -> None:
    """As `gnome-terminal`: return to the caller now, the window lives on in a session of its own (forked
    before GTK connects to the display)."""
    if os.path.basename(sys.argv[0]) != "gnome-terminal":
        return
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)


if __name__ == "__main__":
    detach_when_called_as_client()

import gi  # noqa: E402

gi.require_version("Gtk", "3.0")
gi.require_version("Vte", "2.91")
from gi.repository import GLib, Gtk, Vte  # noqa: E402

TITLE = "Terminal"


def parse_argv(argv: list[str]) -> tuple[str, list[str], str]:
    """(window title, command, working directory) from the command line."""
    split = argv.index("--") if "--" in argv else len(argv)
    options, command = argv[:split], argv[split + 1 :]
    title = options[options.index("--title") + 1] if "--title" in options[:-1] else TITLE
    folder = next((o.split("=", 1)[1] for o in options if o.startswith("--working-directory=")), None)
    return title, command or [os.environ.get("SHELL", "/bin/bash")], folder or os.environ.get("HOME", "/")


def main() -> None:
    title, command, folder = parse_argv(sys.argv[1:])
    GLib.set_prgname("gnome-terminal-server")
    window = Gtk.Window(title=title)
    terminal = Vte.Terminal()
    terminal.set_size(80, 24)
    terminal.connect("child-exited", lambda *_args: Gtk.main_quit())
    terminal.spawn_async(
        Vte.PtyFlags.DEFAULT,
        folder,
        command,
        None,
        GLib.SpawnFlags.SEARCH_PATH,
        None,
        None,
        -1,
        None,
        None,
    )
    window.add(terminal)
    window.connect("destroy", Gtk.main_quit)
    window.show_all()
    terminal.grab_focus()
    Gtk.main()


if __name__ == "__main__":
    main()
