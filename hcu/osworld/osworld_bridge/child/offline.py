"""Offline assets, enforced by the environment the OSWorld process runs in: every HTTP(S) client that honours
the standard proxy variables (requests, urllib, Playwright's driver) is sent to a loopback proxy that refuses
each request with a one-line reason, except for the guest's own address (`NO_PROXY`). The refused URLs are
kept, so hcu can name the fetch that setup or a getter attempted."""

from __future__ import annotations

import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

REFUSAL = "offline_assets forbids fetching"
TELEMETRY_HOSTS = frozenset({"mobile.events.data.microsoft.com"})
"""Hosts libraries report usage to on their own (onnxruntime's native telemetry, sent from its own thread
whenever it likes, even after `disable_telemetry_events`): refused like any other, but not kept, since they are
no fetch of the task's and would be named in whatever step failed next."""
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy")


class RefusingProxy:
    """A loopback HTTP proxy that answers every request (and every CONNECT) with 403."""

    def __init__(self) -> None:
        self.refused: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _refuse(self) -> None:
                url = self.path if self.command != "CONNECT" else f"https://{self.path.removesuffix(':443')}"
                if urlsplit(url).hostname not in TELEMETRY_HOSTS:
                    proxy.refused.append(url)
                body = f"{REFUSAL} {url}".encode()
                self.send_response(403, f"{REFUSAL} {url}")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = do_PATCH = do_CONNECT = _refuse  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, name="offline-proxy", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def install(self, reachable_hosts: list[str]) -> None:
        """Point this process's environment at the proxy; `reachable_hosts` (the guest) bypass it."""
        for name in PROXY_VARIABLES:
            os.environ[name] = self.url
        bypass = ",".join(dict.fromkeys([*reachable_hosts, "127.0.0.1", "localhost"]))
        os.environ["NO_PROXY"] = os.environ["no_proxy"] = bypass

    def uninstall(self) -> None:
        """Let this process's clients go direct again (a later guest context without offline assets)."""
        for name in (*PROXY_VARIABLES, "NO_PROXY", "no_proxy"):
            os.environ.pop(name, None)

    def take_refused(self) -> list[str]:
        """The URLs refused since the last call."""
        taken, self.refused = self.refused, []
        return taken
