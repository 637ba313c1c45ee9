"""AT-SPI side of the in-guest server: the accessibility tree as OSWorld-style XML and the terminal text.

Every AT-SPI call runs on one worker thread that also runs the GLib main loop: libatspi is not
thread-safe, it keeps its cache current from bus events dispatched by that loop, and parallel
traversals can crash GLib under load.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import gi

gi.require_version("Atspi", "2.0")
import lxml.etree  # noqa: E402
import pyatspi  # noqa: E402
from gi.repository import GLib  # noqa: E402

T = TypeVar("T")

NS_BASE = "https://accessibility.ubuntu.example.org/ns/"
NAMESPACES = {
    "st": NS_BASE + "state",
    "attr": NS_BASE + "attributes",
    "cp": NS_BASE + "component",
    "doc": NS_BASE + "document",
    "docattr": NS_BASE + "document/attributes",
    "txt": NS_BASE + "text",
    "val": NS_BASE + "value",
    "act": NS_BASE + "action",
}
MAX_DEPTH = 50
MAX_WIDTH = 1024
TERMINAL_APP = "gnome-terminal-server"
APPLICATION_NAMES = {"Chromium": "Google Chrome"}
"""Applications shown under the official guest's names: Chromium's AT-SPI application node carries its
compiled-in product name, which the UI-string rebranding (apps/chrome_brand.py) cannot reach, and OSWorld's
Chrome getters find the address bar under `application[name=Google Chrome]`."""


class AxWorker:
    """Runs callables on the thread that owns the GLib main loop (and so all AT-SPI state)."""

    def __init__(self) -> None:
        self._loop = GLib.MainLoop()
        threading.Thread(target=self._loop.run, name="atspi", daemon=True).start()

    def call(self, fn: Callable[[], T], timeout: float = 60.0) -> T:
        future: Future[T] = Future()

        def job() -> bool:
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:  # handed to the caller's thread
                    future.set_exception(exc)
            return False

        GLib.idle_add(job)
        return future.result(timeout)


def _qualified(ns: str, name: str) -> str:
    return f"{{{NAMESPACES[ns]}}}{name}"


def _state_names(node: Any) -> list[str]:
    names = []
    for state in node.getState().getStates():
        name = pyatspi.StateType._enum_lookup[state].split("_", 1)[1].lower()
        if name:
            names.append(name)
    return names


def _optional(query: Callable[[], Any]) -> Any:
    """An AT-SPI interface, or None when the node does not implement it."""
    try:
        return query()
    except NotImplementedError:
        return None


def _attributes(node: Any) -> dict[str, str]:
    attrib = {"name": node.name or ""}
    states = _state_names(node)
    for state in states:
        attrib[_qualified("st", state)] = "true"
    for key, value in node.get_attributes().items():
        if key:
            attrib[_qualified("attr", key)] = value
    if "visible" in states and "showing" in states:
        component = _optional(node.queryComponent)
        if component is not None:
            x, y, width, height = component.getExtents(pyatspi.XY_SCREEN)
            attrib[_qualified("cp", "screencoord")] = str((x, y))
            attrib[_qualified("cp", "size")] = str((width, height))
    if _optional(node.queryImage) is not None:
        attrib["image"] = "true"
    if _optional(node.querySelection) is not None:
        attrib["selection"] = "true"
    value = _optional(node.queryValue)
    if value is not None:
        for key, field in (("value", "currentValue"), ("min", "minimumValue"),
                           ("max", "maximumValue"), ("step", "minimumIncrement")):
            attrib[_qualified("val", key)] = str(getattr(value, field))
    action = _optional(node.queryAction)
    if action is not None:
        for index in range(action.nActions):
            name = action.getName(index).replace(" ", "-")
            attrib[_qualified("act", name + "_desc")] = action.getDescription(index)
            attrib[_qualified("act", name + "_kb")] = action.getKeyBinding(index)
    return attrib


def _text(node: Any) -> str:
    text = _optional(node.queryText)
    if text is None:
        return ""
    return text.getText(0, text.characterCount).replace("\ufffc", "").replace("\ufffd", "")


def node_element(node: Any, depth: int) -> lxml.etree._Element:
    """One accessible and (up to MAX_DEPTH / MAX_WIDTH) its subtree as an XML element."""
    role = (node.getRoleName().strip() or "unknown").replace(" ", "-")
    attrib = _attributes(node)
    if role == "application":
        attrib["name"] = APPLICATION_NAMES.get(attrib["name"], attrib["name"])
    element = lxml.etree.Element(role, attrib=attrib, nsmap=NAMESPACES)
    text = _text(node)
    if text:
        element.text = text
    if depth >= MAX_DEPTH:
        return element
    try:
        for index, child in enumerate(node):
            if index == MAX_WIDTH:
                break
            if child is not None:
                element.append(node_element(child, depth + 1))
    except GLib.Error:  # the subtree changed or its app went away mid-walk: keep what was read
        pass
    return element


def accessibility_xml() -> str:
    """The whole desktop as OSWorld's /accessibility XML (root element desktop-frame)."""
    root = lxml.etree.Element("desktop-frame", nsmap=NAMESPACES)
    for app in pyatspi.Registry.getDesktop(0):
        if app is None:
            continue
        try:
            root.append(node_element(app, 1))
        except GLib.Error:  # an app that exits while being read is left out, not an error
            continue
    return lxml.etree.tostring(root, encoding="unicode")


def _focused_terminals(node: Any, depth: int = 0) -> list[Any]:
    if node is None or depth > MAX_DEPTH:
        return []
    if node.getRoleName() == "terminal" and node.getState().contains(pyatspi.STATE_FOCUSED):
        return [node]
    found: list[Any] = []
    for child in node:
        found.extend(_focused_terminals(child, depth + 1))
    return found


def terminal_text() -> str | None:
    """Text of the focused terminal in the active terminal window, or None (as the official guest)."""
    terminals: list[Any] = []
    for app in pyatspi.Registry.getDesktop(0):
        if app is None or app.name != TERMINAL_APP:
            continue
        for frame in app:
            if frame is not None and frame.getState().contains(pyatspi.STATE_ACTIVE):
                terminals.extend(_focused_terminals(frame))
    if len(terminals) != 1:
        return None
    return _text(terminals[0]).rstrip()
