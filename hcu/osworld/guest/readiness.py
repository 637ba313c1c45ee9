"""Readiness of a booting guest, gated and timed step by step.

Each probe asks the guest to do something real (answer, paint, sudo) and fails fast when the container exits
or its log says it can never become ready (console.ContainerWatch) instead of waiting out the boot deadline.
"""

from __future__ import annotations

import contextlib
import io
import shlex
import time
from collections.abc import Iterator
from dataclasses import dataclass

import docker.errors
import requests
from pydantic import BaseModel

from hcu.defaults import RETRIES
from hcu.osworld.errors import ConfigurationError, GuestError
from hcu.osworld.guest.api import ExecResult, GuestAPI, GuestAPIError
from hcu.osworld.guest.console import ContainerWatch

POLL_INTERVAL_SEC = 0.2
PROBE_TIMEOUT_SEC = 10.0
SUDO_TIMEOUT_SEC = 30.0
SUDO_RETRY_SEC = 1.0
SUDO_REFUSED = "incorrect password attempt"
"""What sudo says (C locale) when it refused the password it read: the guest rejects client_password."""
GUEST_FAILURES = (GuestAPIError, docker.errors.DockerException, requests.RequestException, RuntimeError,
                  TimeoutError, OSError)
"""What a guest that does not come up raises; anything else (a TypeError in hcu, a ConfigurationError, an
interruption) passes through unrelabelled."""
CLOCK_TOLERANCE_SEC = 1.0
"""Largest difference allowed between a restored guest's clock and the host's (tasks read dates and file times)."""
GIB = 1 << 30
MIN_GROWN_FRACTION = 0.9
"""Share of volume_size the guest's root filesystem must reach (its metadata takes the rest); OSWorld-V2's own
volume expansion checks the same bound."""


class ReadinessStep(BaseModel):
    name: str
    duration_sec: float
    ok: bool
    error: str | None = None
    detail: str | None = None
    """What the step measured, e.g. the root filesystem's size before and after growing."""


@dataclass
class StepNote:
    """Handed to a step's block, which may leave what it measured for the record."""

    detail: str | None = None


class Readiness:
    """Records each step's duration and outcome; a step that fails as a guest fails (GUEST_FAILURES) raises
    GuestError naming it."""

    def __init__(self, guest_name: str, steps: list[ReadinessStep] | None = None) -> None:
        self.guest_name = guest_name
        self.steps = steps if steps is not None else []
        """Appended to as each step ends (the caller's list, when given: it outlives a failed boot)."""

    @contextlib.contextmanager
    def step(self, name: str, *, required: bool = True) -> Iterator[StepNote]:
        started = time.monotonic()
        note = StepNote()
        try:
            yield note
        except GUEST_FAILURES as exc:
            error = str(exc) or type(exc).__name__
            self.steps.append(
                ReadinessStep(name=name, duration_sec=_since(started), ok=False, error=error, detail=note.detail)
            )
            if required:
                raise GuestError(f"guest {self.guest_name}: readiness step '{name}' failed: {error}") from exc
        except BaseException as exc:  # a phase deadline or a stop signal: the record shows where the boot was
            self.steps.append(ReadinessStep(name=name, duration_sec=_since(started), ok=False,
                                            error=f"{type(exc).__name__}: {exc}"[:300], detail=note.detail))
            raise
        else:
            self.steps.append(ReadinessStep(name=name, duration_sec=_since(started), ok=True, detail=note.detail))


def _since(started: float) -> float:
    return round(time.monotonic() - started, 3)


def wait_running(watch: ContainerWatch, deadline: float) -> None:
    while True:
        watch.check()
        if watch.container.status == "running":
            return
        _sleep_or_timeout(deadline, f"container still {watch.container.status}")


def wait_api(api: GuestAPI, watch: ContainerWatch, deadline: float) -> None:
    """Until `GET /screenshot` answers 200."""
    last = "no answer yet"
    while True:
        watch.check()
        try:
            response = requests.get(f"{api.base_url}/screenshot", timeout=(2.0, PROBE_TIMEOUT_SEC))
            if response.status_code == 200:
                return
            last = f"HTTP {response.status_code}"
        except requests.RequestException as exc:
            last = type(exc).__name__
        _sleep_or_timeout(deadline, f"GET /screenshot: {last}")


def wait_painted(api: GuestAPI, watch: ContainerWatch, deadline: float) -> None:
    """Until a screenshot has more than one colour (an unmapped window or a dead X server gives one)."""
    while True:
        watch.check()
        with contextlib.suppress(GuestAPIError):
            if not is_blank(api.screenshot()):
                return
        _sleep_or_timeout(deadline, "the screen is still one colour")


def is_blank(png: bytes) -> bool:
    from PIL import Image  # lazy: only readiness needs Pillow

    with Image.open(io.BytesIO(png)) as image:
        extrema = image.convert("RGB").getextrema()
    return all(low == high for low, high in extrema)


def _sleep_or_timeout(deadline: float, what: str) -> None:
    if time.monotonic() + POLL_INTERVAL_SEC > deadline:
        raise TimeoutError(f"boot deadline passed: {what}")
    time.sleep(POLL_INTERVAL_SEC)


def sudo_command(password: str, command: str) -> str:
    """A shell command running `command` under `sudo -S`, the password on stdin (not in sudo's argv); in the C
    locale, so sudo's refusal reads the same on every guest."""
    return f"printf '%s\\n' {shlex.quote(password)} | LC_ALL=C sudo -S -k -p '' {command}"


def check_sudo(api: GuestAPI, password: str, *, settle_sec: float = RETRIES.guest_sudo_settle_sec) -> None:
    """sudo works with client_password. A refused password fails at once as a ConfigurationError naming
    client_password (the guest image's password is fixed: every attempt would fail the same way); any other
    failure is a guest not ready yet, tried again for up to `settle_sec`, then a guest failure."""
    settle = time.monotonic() + settle_sec
    while True:
        result = api.execute(sudo_command(password, "true"), shell=True, timeout_sec=SUDO_TIMEOUT_SEC)
        if result.returncode == 0:
            return
        if SUDO_REFUSED in result.error:
            raise ConfigurationError("client_password: the guest's sudo refuses it; set client_password to the "
                                     "password of the guest image's user (fixed in the image)")
        if time.monotonic() + SUDO_RETRY_SEC > settle:
            raise RuntimeError(f"sudo with client_password failed for {settle_sec:g} s: {_said(result)}")
        time.sleep(SUDO_RETRY_SEC)


def set_clock(api: GuestAPI, password: str) -> str:
    """Set the guest's clock to the host's (a restored guest's stood still from its save): read how far behind it
    is, then move it by that much from inside the guest (so the command's own way there does not count), and read
    it again. The difference left must be within CLOCK_TOLERANCE_SEC. Returns it, and how precisely it was read
    (half the fastest read's round trip), for the record."""
    behind, uncertainty = clock_difference(api)
    for _ in range(2):
        if abs(behind) <= CLOCK_TOLERANCE_SEC / 4:
            break
        step = f"import time; time.clock_settime(time.CLOCK_REALTIME, time.time() + {behind:.6f})"
        result = api.execute(sudo_command(password, f"python3 -c {shlex.quote(step)}"), shell=True,
                             timeout_sec=SUDO_TIMEOUT_SEC)
        if result.returncode != 0:
            raise RuntimeError(f"setting the guest's clock failed: {_said(result)}")
        behind, uncertainty = clock_difference(api)
    if abs(behind) > CLOCK_TOLERANCE_SEC:
        raise RuntimeError(f"the guest's clock stays {behind:+.2f} s (+-{uncertainty:.2f} s) off the host's")
    return f"guest clock {-behind:+.2f} s (+-{uncertainty:.2f} s) from the host's"


def clock_difference(api: GuestAPI, reads: int = 3) -> tuple[float, float]:
    """How far the guest's clock is behind the host's, from the fastest of `reads` reads (the read is taken within
    its round trip: half of it is the uncertainty)."""
    best: tuple[float, float] | None = None
    for _ in range(reads):
        sent = time.time()
        result = api.execute(["date", "+%s.%N"], timeout_sec=SUDO_TIMEOUT_SEC)
        received = time.time()
        try:
            guest_now = float(result.output.split()[-1])
        except (ValueError, IndexError):
            raise RuntimeError(f"cannot read the guest's clock from {result.output[-100:]!r}") from None
        sample = ((sent + received) / 2 - guest_now, (received - sent) / 2)
        if best is None or sample[1] < best[1]:
            best = sample
    assert best is not None
    return best


def _said(result: ExecResult) -> str:
    last = (result.error.strip().splitlines() or [""])[-1][:200]
    return f"returncode {result.returncode}" + (f", {last}" if last else "")


GROW_FS_SCRIPT = """
size() {{ findmnt -bno SIZE /; }}
before=$(size)
if [ "$before" -lt {target} ]; then
  root=$(findmnt -n -o SOURCE /)
  disk=/dev/$(lsblk -no PKNAME "$root")
  part=$(cat "/sys/class/block/$(basename "$root")/partition")
  {growpart} "$disk" "$part" || [ $? -eq 1 ]   # exit 1 = NOCHANGE: the partition already fills the disk
  {resize2fs} "$root"
fi
echo "$before $(size)"
"""


def grow_filesystem(api: GuestAPI, password: str, volume_size_gb: int) -> str:
    """Grow the guest's root filesystem into its disk, then measure it inside the guest: it must reach
    MIN_GROWN_FRACTION of volume_size. Growing assumes ext4 on a partition of the boot disk with `growpart`
    (cloud-guest-utils) installed, as on the official Ubuntu image; a filesystem already large enough is left
    alone. Returns the sizes before and after, for the record."""
    target = int(volume_size_gb * GIB * MIN_GROWN_FRACTION)
    script = GROW_FS_SCRIPT.format(
        target=target, growpart=sudo_command(password, "growpart"), resize2fs=sudo_command(password, "resize2fs")
    )
    result = api.execute(["bash", "-ec", script], timeout_sec=SUDO_TIMEOUT_SEC * 2)
    if result.returncode != 0:
        raise RuntimeError(
            f"growpart/resize2fs failed (returncode {result.returncode}): {result.error[-300:]}"
        )
    try:
        before, after = (int(word) for word in result.output.split()[-2:])
    except ValueError:
        raise RuntimeError(f"cannot read the root filesystem's size from {result.output[-200:]!r}") from None
    measured = f"root filesystem {before / GIB:.1f} GiB -> {after / GIB:.1f} GiB (volume_size {volume_size_gb} GiB)"
    if after < target:
        raise RuntimeError(f"{measured}: below {MIN_GROWN_FRACTION:.0%} of volume_size after growing")
    return measured
