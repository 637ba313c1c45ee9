"""One retry record, `hcu.defaults.RETRIES`: every retry limit the runner uses is a field there, each place that
tries something again reads its own field, and changing the record changes what that place does."""

from __future__ import annotations

import ast
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from hcu import REPO_ROOT
from hcu.defaults import RETRIES, RetryDefaults
from hcu.osworld.attempt.agent_phase import AgentLimits
from hcu.osworld.guest.api import GuestAPI, GuestAPIError
from hcu.osworld.records.manifest import Manifest

PACKAGE = REPO_ROOT / "hcu"
LIMIT_NAME = re.compile(r"(ATTEMPTS|RETRIES|RESUMES|TRIES)$")


def test_no_module_but_the_record_holds_a_retry_limit() -> None:
    """tenacity (the retry policies) is used through `Backoff.retrying` only, and no module keeps a retry count of
    its own; the gateways' limits are `GATEWAY`'s."""
    holders = []
    for path in PACKAGE.rglob("*.py"):
        if path == PACKAGE / "defaults.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            holders += [f"{path.relative_to(REPO_ROOT)}: imports {n}" for n in names if n.split(".")[0] == "tenacity"]
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                holders += [f"{path.relative_to(REPO_ROOT)}: {t.id}" for t in node.targets
                            if isinstance(t, ast.Name) and LIMIT_NAME.search(t.id)]
    assert holders == []


@pytest.fixture
def unavailable_guest() -> Iterator[tuple[str, list[str]]]:
    """A loopback stand-in for a guest whose API answers every read with 503 (a transient failure)."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            seen.append(self.path)
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def test_the_guest_api_tries_a_read_as_often_as_the_record_says(unavailable_guest: tuple[str, list[str]]) -> None:
    url, seen = unavailable_guest
    with pytest.raises(GuestAPIError, match="HTTP 503"):
        GuestAPI(url).screenshot()
    assert len(seen) == RETRIES.guest_api.tries == 3
    seen.clear()
    once = RETRIES.guest_api.model_copy(update={"tries": 1})
    with pytest.raises(GuestAPIError, match="HTTP 503"):
        GuestAPI(url, backoff=once).screenshot()
    assert seen == ["/screenshot"], "a record with one try: no retry"


def test_attempts_and_resumes_are_the_records() -> None:
    assert AgentLimits(timeout_sec=0, no_progress_sec=0, resume_delay_sec=0, gateway_away_sec=0).rate_limit_resumes \
        == RETRIES.rate_limit_resumes == 2
    assert Manifest.model_fields["retry_policy"].default == RETRIES.policy
    assert "at most 4 attempts" in RETRIES.policy and "at most 7 attempts" in RetryDefaults(attempts=7).policy
