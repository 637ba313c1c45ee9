"""A setup that outlives its deadline: it waits, then writes a marker into the guest."""

import time

MARKER = "/tmp/hcu-late-write"


class Task902:
    id = "902"
    instruction = "Nothing to do."
    config = []

    def get(self, key, default=None):
        return getattr(self, key, default)

    def setup(self, setup_controller, use_proxy=False):
        time.sleep(4)
        setup_controller._execute_setup(["touch", MARKER])

    def evaluate(self, env):
        return 0.0


TASK_CLASS = Task902
