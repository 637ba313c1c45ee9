"""A task on a V2 mock website: it needs WEBSITE_HOST_SUFFIX, as the official ones do."""

import os


class Task904:
    id = "904"
    instruction = "Book the cheapest flight on the travel site."
    config = []

    def get(self, key, default=None):
        return getattr(self, key, default)

    def setup(self, setup_controller, use_proxy=False):
        url = f"https://travelhubpro.{os.environ['WEBSITE_HOST_SUFFIX']}/"
        setup_controller._chrome_open_tabs_setup([url])

    def evaluate(self, env):
        return 0.0


TASK_CLASS = Task904
