"""After a setup step that starts an application, check that the application is really there.

The guest answers `launch` as soon as the process is spawned, so a step can succeed while the application
dies at start. After `launch`, `open` and `chrome_open_tabs`, setup (the canary's and run_task's) polls, with
a deadline and never a fixed sleep, for what OSWorld's getters will later read: a window of the application
(not its splash), Chrome's debugging port (CDP) answering on the leased host port and its profile written,
VLC's HTTP interface, the tabs a step opened. So the agent starts on a desktop whose applications are up (what
OSWorld's own runner waits 60 s for after reset), and a canary cannot pass an application that never came.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import requests

from hcu.defaults import GUEST, SETUP
from hcu.osworld.errors import SetupError
from hcu.osworld.guest.api import GuestAPIError
from hcu.osworld.guest.lifecycle import Guest

POLL_SEC = 0.5
HTTP_TIMEOUT = (3, 10)
VLC_PASSWORD = "password"
"""What OSWorld's VLC getters send (the official guest's VLC HTTP password)."""
CHROME_PREFERENCES = f"{GUEST.home}/.config/google-chrome/Default/Preferences"
"""The profile file OSWorld's Chrome getters read: Chrome writes it some seconds after it starts."""
THUNDERBIRD_GLODA = f"{GUEST.home}/.thunderbird/*/global-messages-db.sqlite"
"""Thunderbird's message index (gloda), which OSWorld's Thunderbird getters read: Thunderbird writes it some
seconds after it starts (about 3 s on the test desktop)."""
SPLASHES = {"gimp": "GIMP Startup"}
"""Windows an application shows while it is still loading (titles, by program)."""
GIMP_NO_RAW_LOADER = {".raw", ".rw2", ".pef", ".cr2", ".cr3", ".crw", ".nef", ".nrw", ".arw", ".srf", ".sr2", ".3fr",
                      ".fff", ".iiq", ".cap", ".dcr", ".kdc", ".mrw", ".mdc", ".rdc"}
"""Camera RAW files: GIMP 2.10 without darktable or RawTherapee (the official guest has neither) answers them with
its "no RAW loader installed" message (its file-raw-placeholder plug-in), never a window of the file."""
MEDIA = {".mp4", ".mp3", ".wav", ".avi", ".mkv", ".webm", ".ogg", ".flac", ".m4a", ".mov"}


class AppMissing(SetupError):
    """A setup step succeeded, but the application it started is not there."""


@dataclass(frozen=True)
class Expectation:
    what: str
    """e.g. "a window of Google Chrome"."""
    probe: Callable[[], str | None]
    """None when met, else what was seen instead (one short line)."""


class AppCheck:
    """The canary's `StepCheck`: called after each successful setup step."""

    def __init__(self, guest: Guest, deadline_sec: float = SETUP.app_start_timeout_sec) -> None:
        self.guest, self.deadline_sec = guest, deadline_sec
        self._debugging_chrome = self._bridge = False
        """Chrome launched with a debugging port, and the tasks' socat bridge to it: CDP answers once both ran
        (in either order: some tasks start the bridge first and leave Chrome to the agent)."""

    def __call__(self, step: dict[str, Any]) -> list[str]:
        expectations = self.expectations(step)
        for expectation in expectations:
            self._wait(expectation)
        return [e.what for e in expectations]

    def expectations(self, step: dict[str, Any]) -> list[Expectation]:
        parameters = step.get("parameters") or {}
        if step.get("type") == "launch":
            return self._for_command(parameters.get("command") or [], bool(parameters.get("shell")))
        if step.get("type") == "open":
            return self._for_open(str(parameters.get("path", "")))
        if step.get("type") == "chrome_open_tabs":
            return [self._tabs(list(parameters.get("urls_to_open") or []))]
        return []

    def _wait(self, expectation: Expectation) -> None:
        deadline = time.monotonic() + self.deadline_sec
        seen = expectation.probe()
        while seen is not None:
            if time.monotonic() >= deadline:
                raise AppMissing(f"{expectation.what}: not there {self.deadline_sec:g} s after the step ({seen})")
            time.sleep(POLL_SEC)
            seen = expectation.probe()

    # What each program or file needs ---------------------------------------------------------------------------

    def _for_command(self, command: list[str] | str, shell: bool) -> list[Expectation]:
        words = shlex.split(command) if isinstance(command, str) else [str(w) for w in command]
        words = [w for w in words if not (shell and "=" in w and not w.startswith("-"))]  # VAR=value prefixes
        if not words:
            return []
        program = PurePosixPath(words[0]).name
        if program in ("google-chrome", "google-chrome-stable", "chromium"):
            self._debugging_chrome |= any(w.startswith("--remote-debugging-port") for w in words)
            return [self._window("Google Chrome", "Google-chrome"), self._chrome_profile(), *self._cdp_once_bridged()]
        if program == "socat" and any(w.startswith("tcp-listen:9222") for w in words):
            self._bridge = True
            return self._cdp_once_bridged() or [self._process("socat's bridge to Chrome's debugging port", "socat")]
        if program in ("vlc", "cvlc"):
            return [self._window("VLC", "VLC media player"), self._vlc_http()]
        windows = {  # program: (application, what its windows' `wmctrl -lx` lines contain)
            "gimp": ("GIMP", "gimp"), "libreoffice": ("LibreOffice", "libreoffice"),
            "soffice": ("LibreOffice", "libreoffice"), "thunderbird": ("Thunderbird", "thunderbird"),
            "nautilus": ("Files", "nautilus"), "evince": ("Document Viewer", "evince"),
            "code": ("VS Code", "code.code"),
        }
        if program not in windows:
            return []
        opened = [PurePosixPath(w.rstrip("/")) for w in words[1:] if w.startswith(("/", "~/"))]
        index = [self._thunderbird_index()] if program == "thunderbird" else []
        return [self._window(*windows[program], splash=SPLASHES.get(program)), *index] + [
            self._window(f"GIMP's message for {p.name} (no RAW loader)", "GIMP Message", titled=True)
            if program == "gimp" and p.suffix.lower() in GIMP_NO_RAW_LOADER else
            self._window(p.stem, p.stem, titled=True) for p in opened]

    def _for_open(self, raw: str) -> list[Expectation]:
        path = PurePosixPath(raw.rstrip("/"))
        found = [self._window(path.name, path.name, titled=True)]
        if path.suffix.lower() in MEDIA:
            found.append(self._vlc_http())
        return found

    # Probes ------------------------------------------------------------------------------------------------------

    def _window(self, name: str, text: str, titled: bool = False, splash: str | None = None) -> Expectation:
        """A window whose `wmctrl -lx` line (class, host, title: a class may hold spaces) contains `text`
        (case-insensitive unless `titled`: then a window titled with a file's name); a start-up splash
        window (its title ends with `splash`) does not count."""
        def probe() -> str | None:
            lines = [line for line in self._window_lines() if not (splash and line.endswith(splash))]
            if any((text in line) if titled else (text.lower() in line.lower()) for line in lines):
                return None
            return "windows: " + (" | ".join(lines) or "none")

        return Expectation(f"a window titled with {name}" if titled else f"a window of {name}", probe)

    def _window_lines(self) -> list[str]:
        listing = self._execute(["wmctrl", "-lx"])
        return [line.split(None, 2)[2] for line in listing.splitlines() if len(line.split(None, 2)) == 3]

    def _cdp_once_bridged(self) -> list[Expectation]:
        return [self._cdp()] if self._debugging_chrome and self._bridge else []

    def _process(self, what: str, name: str) -> Expectation:
        def probe() -> str | None:
            return None if self._execute(["pgrep", "-x", name], output=False) == "0" else f"no process {name}"

        return Expectation(f"{what} running", probe)

    def _chrome_profile(self) -> Expectation:
        def probe() -> str | None:
            found = self._execute(["test", "-s", CHROME_PREFERENCES], output=False)
            return None if found == "0" else f"{CHROME_PREFERENCES} not written yet"

        return Expectation("Chrome's profile written (Default/Preferences, read by OSWorld's Chrome getters)", probe)

    def _thunderbird_index(self) -> Expectation:
        def probe() -> str | None:
            script = f'for f in {THUNDERBIRD_GLODA}; do test -s "$f" && exit 0; done; exit 1'
            found = self._execute(["sh", "-c", script], output=False)
            return None if found == "0" else f"{THUNDERBIRD_GLODA} not written yet"

        return Expectation("Thunderbird's message index written (global-messages-db.sqlite, read by OSWorld's "
                           "Thunderbird getters)", probe)

    def _cdp(self) -> Expectation:
        url = f"http://{self.guest.host}:{self.guest.ports.cdp}/json/version"

        def probe() -> str | None:
            answer = _get(url)
            if isinstance(answer, requests.Response) and answer.ok and "Browser" in _json(answer):
                return None
            return _seen(answer)

        return Expectation(f"Chrome's CDP answering on the leased port {self.guest.ports.cdp}", probe)

    def _tabs(self, urls: list[str]) -> Expectation:
        url = f"http://{self.guest.host}:{self.guest.ports.cdp}/json/list"
        wanted = [_site(u) for u in urls]

        def probe() -> str | None:
            answer = _get(url)
            if not (isinstance(answer, requests.Response) and answer.ok):
                return _seen(answer)
            pages = [t.get("url", "") for t in _json(answer, []) if isinstance(t, dict) and t.get("type") == "page"]
            missing = [u for u, site in zip(urls, wanted, strict=True) if site not in {_site(p) for p in pages}]
            return None if not missing else f"no tab of {', '.join(missing)}; tabs: {', '.join(pages) or 'none'}"

        return Expectation(f"{len(urls)} tab(s) open over CDP", probe)

    def _vlc_http(self) -> Expectation:
        url = f"http://{self.guest.host}:{self.guest.ports.vlc}/requests/status.xml"

        def probe() -> str | None:
            answer = _get(url, auth=("", VLC_PASSWORD))
            if isinstance(answer, requests.Response) and answer.ok and "<state>" in answer.text:
                return None
            return _seen(answer)

        return Expectation(f"VLC's HTTP interface on the leased port {self.guest.ports.vlc}", probe)

    def _execute(self, argv: list[str], output: bool = True) -> str:
        try:
            result = self.guest.api.execute(argv, timeout_sec=30)
        except GuestAPIError as exc:
            return f"guest: {exc}"
        return result.output if output else str(result.returncode)


def _get(url: str, **kwargs: Any) -> requests.Response | str:
    try:
        return requests.get(url, timeout=HTTP_TIMEOUT, **kwargs)
    except requests.RequestException as exc:
        return type(exc).__name__


def _json(response: requests.Response, default: Any = None) -> Any:
    try:
        return response.json()
    except ValueError:
        return {} if default is None else default


def _seen(answer: requests.Response | str) -> str:
    return answer if isinstance(answer, str) else f"HTTP {answer.status_code}"


def _site(url: str) -> str:
    """A URL's host without `www.`: a tab that redirected within its site still counts."""
    host = (urlsplit(url).hostname or url).lower()
    return host.removeprefix("www.")
