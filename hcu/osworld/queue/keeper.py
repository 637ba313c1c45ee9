"""`python -m hcu.osworld.queue.keeper -- COMMAND...`: run an attempt's runner on a Ray node so that it ends
with its Ray worker, but gracefully.

Ray kills a worker's direct children with SIGKILL when the worker exits, and a runner killed that way cannot
remove its guest. So the worker starts this keeper, and the keeper starts the runner with SIGTERM as its
parent-death signal: whether the keeper is killed, or its worker dies (the keeper's own parent-death signal),
the runner gets SIGTERM, records the attempt as interrupted and removes its guest. A SIGTERM or SIGINT to the
keeper is passed on the same way. The keeper exits with the runner's status. It imports only the standard
library (the node agent starts it as a file, without site-packages).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(sig: signal.Signals = signal.SIGTERM) -> Callable[[], None]:
    """A `preexec_fn` giving the child `sig` when the process (thread) that starts it ends."""
    parent = os.getpid()

    def arm() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig))
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return arm


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "--" or len(argv) < 2:
        print("usage: python -m hcu.osworld.queue.keeper -- COMMAND...", file=sys.stderr)
        return 2
    child = subprocess.Popen(argv[1:], preexec_fn=die_with_parent())
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
    while True:
        try:
            return child.wait()
        except InterruptedError:
            continue


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
