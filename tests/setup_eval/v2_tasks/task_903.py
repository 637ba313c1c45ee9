"""A setup that fetches an input file from the network (an `.invalid` host: nothing could answer it)."""

import requests

URL = "https://assets.hcu.invalid/inputs/report.bin"


class Task903:
    id = "903"
    instruction = "Nothing to do."
    config = []

    def get(self, key, default=None):
        return getattr(self, key, default)

    def setup(self, setup_controller, use_proxy=False):
        requests.get(URL, timeout=10).raise_for_status()

    def evaluate(self, env):
        return 0.0


TASK_CLASS = Task903
