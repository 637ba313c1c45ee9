"""One client request through the gateway, from arrival to its token-log row.

Read and check the body, reserve a budget slot (generations only), place the task on an upstream, send, and
classify what comes back through the provider. Rate limits are waited out and resent before the client has
seen a byte; streams are forwarded event by event once the preamble is past (`hcu.gateway.relay`). Every
request ends in exactly one row, whether it succeeded, failed, was refused, or its client left.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time

import aiohttp
import orjson
from aiohttp import web
from yarl import URL

from hcu.gateway.backoff import backoff_sec, hint_from_headers
from hcu.gateway.credentials import CLIENT_CREDENTIAL_HEADERS, REDACTED, CredentialError, scrub
from hcu.gateway.pool import Placement
from hcu.gateway.provider import Signal, as_dict, loads_or_none
from hcu.gateway.relay import ClientGone, StreamRelay
from hcu.gateway.request_body import BodyError, RequestBody, read_body
from hcu.gateway.routes import Route, filter_query
from hcu.gateway.state import GatewayState
from hcu.gateway.tokenlog import Outcome, TokenUsage

log = logging.getLogger("hcu.gateway")

HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
     "transfer-encoding", "upgrade", "host", "content-length"}
)
PRIVATE_REQUEST_HEADERS = frozenset(
    {"cookie", "openai-organization", "openai-project", "x-goog-user-project", "forwarded", "x-real-ip", "via",
     "x-hcu-resource", "accept-encoding"}
)
"""Client headers that are not the provider API's business: the operator's billing scope (organization,
project), the client's cookies and addresses. `accept-encoding` is replaced by identity (streams are read)."""
DROP_REQUEST_PREFIXES = ("x-forwarded-",)
DROP_REQUEST_HEADERS = HOP_HEADERS | CLIENT_CREDENTIAL_HEADERS | PRIVATE_REQUEST_HEADERS
DROP_RESPONSE_HEADERS = HOP_HEADERS | {"content-encoding", "set-cookie"}
"""aiohttp decompresses what it receives, so a content-encoding header would no longer be true."""
CONNECT_RETRY_DELAYS_SEC = (0.25, 0.5, 1.0, 2.0)
"""Waits before re-trying a connection the upstream refused: a blip of a few seconds is not a failure."""
MIN_WAIT_SEC = 0.1
"""Floor under an upstream's `retry-after: 0`, so a persistent rate limit cannot become a hot resend loop."""
MIN_COOLDOWN_SEC = 1.0
"""Floor under a deployment's cooldown, so two rate-limited deployments are not swapped back and forth."""


class Exchange:
    """One client request, from arrival to its token-log row."""

    def __init__(self, state: GatewayState, request: web.Request, task: str, rest: str,
                 route: Route | None) -> None:
        self.s, self.request, self.task, self.rest = state, request, task, rest
        self.route = route
        """None: the method and path are outside the provider's allow-list."""
        self.generation = route is not None and route.kind == "generation"
        self.started = time.monotonic()
        self.body: RequestBody | None = None
        self.model: str | None = None
        self.placement: Placement | None = None
        self.reserved = False
        self.status = 0
        self.outcome: Outcome = "failed"
        self.usage: TokenUsage | None = None
        self.ttfb: float | None = None
        self.waited = 0.0
        self.rate_limits = 0
        self.attempts = 0
        self.request_id: str | None = None
        self.response_id: str | None = None
        self.relay: StreamRelay | None = None
        self.hint: float | None = None
        """Wait the upstream asked for in its last rate limit."""
        self.retry_after = 0.0
        self.last_error: tuple[int, bytes, object] | None = None
        """Status, body and headers of the last rate-limit answer that was an HTTP error."""

    async def run(self) -> web.StreamResponse:
        try:
            return await self.serve()
        except (asyncio.CancelledError, ClientGone):
            # The client left. A generation whose final success event already went out was delivered: it is
            # a success, counted, with its usage.
            delivered = self.relay is not None and self.relay.delivered
            if self.relay is not None:
                self.usage, self.response_id = self.relay.watch.usage, self.relay.watch.response_id
            self.outcome = "success" if delivered else "disconnected" if self.generation else "free"
            raise
        finally:
            counted = self.reserved and self.outcome == "success"
            calls = self.s.budget.settle(self.task, self.reserved, self.outcome, counted, self.generation)
            self.write_row(counted, calls)

    async def serve(self) -> web.StreamResponse:
        s, method = self.s, self.request.method
        if self.route is None:
            log.warning("task %s: refused %s /%s (not a route this gateway serves)", self.task, method, self.rest[:200])
            self.outcome = "refused_route"
            return self.error(404, "not_found", f"{method} /{self.rest[:200]} is not served by this gateway")
        if self.generation and not s.token_log.writable:
            self.outcome = "refused_log"
            return self.error(503, "token_log_unavailable",
                              "the gateway cannot write its token log; no generation until it can")
        try:
            self.body = await read_body(self.request, s.config.max_body_bytes)
            continues_state = self.inspect(self.body)
        except BodyError as exc:
            self.outcome = "invalid_request"
            return self.error(exc.status, exc.code, str(exc))
        if self.generation:
            self.reserved = await s.budget.reserve(self.task)
            if not self.reserved:
                self.outcome = "refused_budget"
                message = f"max_model_calls: task {self.task} used all {s.budget.limit} model calls"
                return self.error(402, "max_model_calls", message)
        response = await self.forward(continues_state)
        if not self.generation:
            self.outcome = "free"
        return response

    def inspect(self, body: RequestBody) -> bool:
        """Take what the gateway needs from the JSON body (the parsed tree is dropped on return); whether
        the request continues server-side state. BodyError for a body the gateway refuses."""
        p = self.s.provider
        parsed = body.parse(self.s.config.max_body_bytes)
        flags = [f for f in p.refused_body_flags if as_dict(parsed).get(f)]
        if flags:
            raise BodyError(403, "unsupported_request", f"{flags[0]}: the gateway serves only foreground "
                            "calls it can count (set it false)")
        self.model = p.model_of(self.rest, parsed)
        return p.continues_state(parsed)

    def error(self, status: int, code: str, message: str, headers: dict | None = None) -> web.Response:
        self.status = status
        body = self.s.provider.error_body(self.rest, status, code, message)
        return web.Response(status=status, body=body, headers=headers, content_type="application/json")

    async def forward(self, continues_state: bool) -> web.StreamResponse:
        while True:
            self.placement = self.s.pool.place(self.task, continues_state)
            upstream = None
            try:
                upstream = await self.send()
                result = await self.receive(upstream)
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                timeout = isinstance(exc, asyncio.TimeoutError)
                log.warning("task %s: upstream %s %s", self.task, self.placement.upstream.label,
                            "timed out" if timeout else f"failed ({type(exc).__name__})")
                return self.error(504 if timeout else 502, "upstream_unavailable", "upstream did not answer")
            except CredentialError as exc:
                log.warning("task %s: %s", self.task, exc)
                return self.error(502, "upstream_credential_unavailable", str(exc))
            finally:
                if upstream is not None and upstream.content.at_eof():
                    upstream.release()
                elif upstream is not None:
                    upstream.close()  # unread or cut short: cancel the upstream request at once
            if result is not None:
                return result
            if not await self.wait_rate_limit(continues_state):
                return self.give_up()

    async def send(self) -> aiohttp.ClientResponse:
        """Send to the placed upstream; a refused connection is re-tried a few times (nothing was sent)."""
        p, req = self.s.provider, self.request
        assert self.placement is not None and self.s.session is not None and self.body is not None
        headers = {k: v for k, v in req.headers.items()
                   if k.lower() not in DROP_REQUEST_HEADERS and not k.lower().startswith(DROP_REQUEST_PREFIXES)}
        headers["Accept-Encoding"] = "identity"
        headers.update(await p.credential.headers())
        if self.placement.pinned_resource:
            headers["X-HCU-Resource"] = self.placement.pinned_resource
        data: bytes | bytearray = self.body.raw
        model = p.upstream_model(self.placement.upstream)
        if model is not None and data and model != self.model:  # Azure v1: the deployment's name as model
            obj = loads_or_none(self.body.json_bytes())
            if isinstance(obj, dict):
                obj["model"] = model
                data = orjson.dumps(obj)
                headers = {k: v for k, v in headers.items() if k.lower() != "content-encoding"}
        query = filter_query(req.rel_url.raw_query_string, p.query_params)
        url = URL(p.upstream_url(self.placement.upstream, self.rest, query), encoded=True)
        for delay in (*CONNECT_RETRY_DELAYS_SEC, None):
            self.attempts += 1
            try:
                return await self.s.session.request(
                    req.method, url, headers=headers, data=data or None, allow_redirects=False
                )
            except aiohttp.ClientConnectorError as exc:
                if delay is None or isinstance(exc, aiohttp.ClientSSLError):
                    raise
                log.warning("task %s: cannot connect to %s (%s), retrying in %.2f s", self.task,
                            self.placement.upstream.label, type(exc).__name__, delay)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def receive(self, up: aiohttp.ClientResponse) -> web.StreamResponse | None:
        """Classify the upstream's answer and pass it on; None means rate-limited, nothing sent yet."""
        assert self.placement is not None
        self.s.pool.saw_remaining(self.placement.upstream, up.headers.get("x-ratelimit-remaining-tokens"))
        self.request_id = up.headers.get("x-request-id") or up.headers.get("request-id") or self.request_id
        if up.content_type == "text/event-stream" and up.status < 300:
            self.relay = StreamRelay(self, up)
            return await self.relay.run()
        data = await up.read()
        if up.status >= 300:
            verdict = self.s.provider.error_verdict(up.status, data)
        else:
            verdict = self.s.provider.json_verdict(loads_or_none(data) if data else None)
            self.usage, self.response_id = verdict.usage, verdict.response_id
        if verdict.signal is Signal.RATE_LIMIT:
            self.hint = hint_from_headers(up.headers)
            self.hint = self.hint if self.hint is not None else verdict.retry_after_sec
            self.last_error = (up.status, data, up.headers)
            return None
        self.outcome = "success" if verdict.signal is Signal.SUCCESS else "failed"
        self.status = up.status
        return web.Response(status=up.status, body=self.scrub(data), headers=self.response_headers(up.headers))

    def scrub(self, data: bytes | bytearray) -> bytes | bytearray:
        """Whatever the upstream echoes of the real credential never reaches the client."""
        return scrub(data, self.s.provider.credential.secret_values())

    def response_headers(self, headers: object, drop: frozenset[str] = DROP_RESPONSE_HEADERS) -> dict[str, str]:
        kept = {k: v for k, v in headers.items() if k.lower() not in drop}  # type: ignore[attr-defined]
        values = "\n".join(kept.values())
        for secret in self.s.provider.credential.secret_values():
            if secret.decode() in values:  # rare: only then look at each header
                kept = {k: REDACTED.decode() if secret.decode() in v else v for k, v in kept.items()}
        return kept

    async def wait_rate_limit(self, continues_state: bool) -> bool:
        """After a rate limit: move or wait, True to resend; False when the wait would exceed the cap."""
        assert self.placement is not None
        self.rate_limits += 1
        delay = max(self.hint, MIN_WAIT_SEC) if self.hint is not None else backoff_sec(self.rate_limits)
        upstream = self.placement.upstream
        self.s.pool.cool_down(upstream, max(delay, MIN_COOLDOWN_SEC))
        if not continues_state and self.s.pool.move(self.task, self.placement):
            log.info("task %s: %s rate-limited, moved to %s", self.task, upstream.label,
                     self.placement.upstream.label)
            return True
        if self.waited + delay > self.s.config.rate_limit_max_wait:
            self.retry_after = delay
            return False
        log.info("task %s: rate-limited by %s, waiting %.2f s", self.task, upstream.label, delay)
        st = self.s.budget.state(self.task)
        st.waiting_now += 1
        began = time.monotonic()
        try:
            await asyncio.sleep(delay)
        finally:  # a client that leaves mid-wait cancels the sleep: count what was actually waited
            waited = min(delay, time.monotonic() - began)
            st.waiting_now -= 1
            self.waited += waited
            self.s.budget.add_wait(self.task, waited)
        return True

    def give_up(self) -> web.Response:
        self.outcome = "rate_limited"
        retry_after = str(max(1, math.ceil(self.retry_after)))
        log.warning("task %s: still rate-limited after %.1f s of waits, giving up", self.task, self.waited)
        if self.last_error is not None:
            status, data, headers = self.last_error
            self.status = status
            kept = self.response_headers(headers, DROP_RESPONSE_HEADERS | {"retry-after", "retry-after-ms"})
            kept["Retry-After"] = retry_after
            return web.Response(status=status, body=self.scrub(data), headers=kept)
        return self.error(
            429, "rate_limit_exceeded", "upstream rate limit persisted", {"Retry-After": retry_after}
        )

    def write_row(self, counted: bool, calls_used: int) -> None:
        upstream = self.placement.upstream if self.placement else None
        latency = time.monotonic() - self.started
        if self.ttfb is None and self.status:
            self.ttfb = latency  # a plain (non-streamed) answer goes out in one piece at the end
        # A plain dict in TokenLogRow's field order: validating a row we just built from typed values would
        # cost more than the rest of the bookkeeping (readers validate with read_token_log).
        self.s.token_log.append_fields(
            {
                "time": time.time(),
                "task": self.task,
                "provider": self.s.provider.name,
                "upstream": self.placement.resource if self.placement else None,
                "deployment": upstream.deployment if upstream else None,
                "model": self.model,
                "path": "/" + self.rest,
                "status": self.status,
                "outcome": self.outcome,
                "counted": counted,
                "calls_used": calls_used,
                "usage": self.usage.model_dump() if self.usage else None,
                "latency_sec": round(latency, 4),
                "ttfb_sec": round(self.ttfb, 4) if self.ttfb is not None else None,
                "rate_limit_wait_sec": round(self.waited, 3),
                "attempts": self.attempts,
                "upstream_request_id": self.request_id,
                "response_id": self.response_id,
            },
            charged=self.reserved,
        )
