"""One client request through the gateway, from arrival to its token-log row.

Read and check the body, reserve a budget slot (generations only), place the task on an upstream, send, and
classify what comes back through the provider. Rate limits are waited out and resent before the client has
seen a byte; streams are forwarded event by event once the preamble is past (`hcu.gateway.relay`). Every
request is written down once (`hcu.gateway.ledger`: free traffic as its scope's counters decide), whether it
succeeded, failed, was refused, or its client left.

A client that leaves ends what has not reached the upstream yet (its body, a wait for a slot or a rate
limit); a generation already sent runs on, its answer read at most `drain_timeout_sec` more, and it counts if
the upstream completed it: the upstream generated it either way, and a client that takes every delta and
leaves before the final event got the answer.
"""

from __future__ import annotations

import asyncio
import logging
import math

import aiohttp
import orjson
from aiohttp import web
from yarl import URL

from hcu.gateway.backoff import backoff_sec, hint_from_headers
from hcu.gateway.body_json import field, field_at, inspect_json, replace_field
from hcu.gateway.credentials import CredentialError, scrub
from hcu.gateway.headers import DROP_RESPONSE_HEADERS, client_headers, undecoded_encoding, upstream_headers
from hcu.gateway.listener import on_client_lost
from hcu.gateway.pool import Placement
from hcu.gateway.provider import Signal, StreamWatch, Verdict, loads_or_none
from hcu.gateway.refusal import Refused
from hcu.gateway.relay import Client, RelayIO, StreamRelay, StreamResult
from hcu.gateway.request_body import read_body
from hcu.gateway.routes import Route, filter_query
from hcu.gateway.state import GatewayState
from hcu.gateway.tokenlog import Outcome, TokenUsage

log = logging.getLogger("hcu.gateway")

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
        self.clock = state.clock
        self.route = route
        """None: the method and path are outside the provider's allow-list."""
        self.generation = route is not None and route.kind == "generation"
        self.started = self.clock.monotonic()
        self.client = Client(self.client_left, drain=self.generation)
        self.handler: asyncio.Task | None = None
        """The handler's task (a client that leaves does not cancel it; `client_left` decides)."""
        self.in_attempt = False
        """An attempt has gone (or is going) upstream: a client leaving now lets it finish."""
        self.drain_timer: asyncio.TimerHandle | None = None
        self.hold = state.bodies.hold(request.remote or "?")
        self.body: bytes | bytearray = b""
        self.query = ""
        self.model: str | None = None
        self.placement: Placement | None = None
        self.reserved = False
        self.status = 0
        self.outcome: Outcome = "failed"
        self.usage: TokenUsage | None = None
        self.watch: StreamWatch | None = None
        self.ttfb: float | None = None
        self.waited = 0.0
        self.rate_limits = 0
        self.attempts = 0
        self.request_id: str | None = None
        self.response_id: str | None = None
        self.hint: float | None = None
        """Wait the upstream asked for in its last rate limit."""
        self.retry_after = 0.0
        self.last_error: tuple[int, bytes, object] | None = None
        """Status, body and headers of the last rate-limit answer that was an HTTP error."""

    async def run(self) -> web.StreamResponse:
        """Serve the request; a client that leaves meanwhile is handled by `client_left`."""
        self.handler = asyncio.current_task()
        stop_watching = on_client_lost(self.request, self.client.leave)
        if self.handler is not None:
            self.s.exchanges.add(self.handler)
        try:
            return await self.lifecycle()
        finally:
            stop_watching()
            self.s.exchanges.discard(self.handler)  # type: ignore[arg-type]

    def client_left(self) -> None:
        """What had not reached the upstream ends at once, as does all but a generation, and a generation whose
        verdict is in; a generation the upstream runs is read on, at most `drain_timeout_sec`."""
        handler = self.handler
        if handler is None or handler.done():
            return
        if not self.generation or not self.in_attempt or (self.watch is not None and self.watch.verdict is not None):
            handler.cancel()
            return
        log.info("task %s: the client left mid-generation; reading the upstream's answer (at most %g s)",
                 self.task, self.s.config.drain_timeout_sec)
        self.drain_timer = asyncio.get_running_loop().call_later(self.s.config.drain_timeout_sec, handler.cancel)

    async def lifecycle(self) -> web.StreamResponse:
        try:
            return await self.serve()
        except (asyncio.CancelledError, ConnectionError):  # the client left (or a shutdown ends the request)
            if self.watch is not None:  # a stream cut short by the drain deadline or a shutdown
                self.usage, self.response_id = self.watch.usage, self.watch.response_id
            succeeded = self.watch is not None and self.watch.succeeded
            self.outcome = "free" if not self.generation else "success" if succeeded else "disconnected"
            raise
        finally:
            if self.drain_timer is not None:
                self.drain_timer.cancel()
            self.hold.release()
            if self.generation and self.client.gone and self.outcome in ("failed", "rate_limited"):
                self.outcome = "disconnected"  # the client never saw how it ended: not a failure of the task
            counted = self.reserved and self.outcome == "success"
            calls = self.s.budget.settle(self.task, self.reserved, self.outcome, counted, self.generation)
            self.write_row(counted, calls)

    async def serve(self) -> web.StreamResponse:
        s, method = self.s, self.request.method
        if self.route is None:
            if s.ledger.refusals.is_quiet(self.task):  # the first few of an interval: the rest are counted
                log.warning("task %s: refused %s /%s (not served here)", self.task, method, self.rest[:200])
            self.outcome = "refused_route"
            return self.error(404, "not_found", f"{method} /{self.rest[:200]} is not served by this gateway")
        if not self.generation and (refused := s.ledger.take_free_call(self.task)) is not None:
            self.outcome = "refused_rate"
            return self.error(refused.status, refused.code, refused.message, refused.headers())
        if self.generation and not s.token_log.writable:
            self.outcome = "refused_log"
            return self.error(503, "token_log_unavailable",
                              "the gateway cannot write its token log; no generation until it can")
        try:
            self.query = filter_query(self.request.rel_url.raw_query_string, s.provider.query_params)
            self.body, continues_state = inspect_json(await read_body(self.request, s.body_limits, self.hold),
                                                      self.inspect)
        except Refused as exc:
            self.outcome = "invalid_request"
            return self.error(exc.status, exc.code, str(exc), close=exc.close)
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

    def inspect(self, body: object) -> bool:
        """Take what the gateway needs from the JSON body (the parsed tree is dropped on return); whether
        the request continues server-side state. Refused for a body the gateway will not forward."""
        p = self.s.provider
        for flag in p.refused_body_flags:
            if field(body, flag) not in (None, False):
                raise Refused(403, "unsupported_request", f"{flag}: the gateway serves only foreground calls it "
                              "can count (set it false)")
        for path in p.single_generation_fields:
            count = field_at(body, path)
            if count is not None and (type(count) is not int or count != 1):
                raise Refused(403, "unsupported_request", f"{'.'.join(path)}: the gateway serves one generation "
                              "per call, and counts calls (set it to 1)")
        self.model = p.model_of(self.rest, body)
        return p.continues_state(body)

    def error(self, status: int, code: str, message: str, headers: dict | None = None, *,
              close: bool = False) -> web.Response:
        self.status = status
        body = self.s.provider.error_body(self.rest, status, code, message)
        response = web.Response(status=status, body=body, headers=headers, content_type="application/json")
        if close:
            response.force_close()
        return response

    async def forward(self, continues_state: bool) -> web.StreamResponse:
        while True:
            self.placement = self.s.pool.place(self.task, continues_state)
            self.in_attempt = True
            try:
                result = await self.attempt()
            finally:
                self.in_attempt = False
            if result is not None:
                return result
            if self.client.gone:
                raise asyncio.CancelledError  # rate-limited, and nobody waits for the resend
            if not await self.wait_rate_limit(continues_state):
                return self.give_up()

    async def attempt(self) -> web.StreamResponse | None:
        """One try upstream: its answer, or None when it was rate-limited before the client saw a byte."""
        assert self.placement is not None
        upstream, self.watch = None, None  # a new attempt: the last one's verdict is not this one's
        try:
            upstream = await self.send()
            return await self.receive(upstream)
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            timeout = isinstance(exc, asyncio.TimeoutError)
            log.warning("task %s: upstream %s %s", self.task, self.placement.upstream.label,
                        "timed out" if timeout else f"failed ({type(exc).__name__})")
            self.outcome = "failed"
            return self.error(504 if timeout else 502, "upstream_unavailable", "upstream did not answer")
        except CredentialError as exc:
            log.warning("task %s: %s", self.task, exc)
            self.outcome = "failed"
            return self.error(502, "upstream_credential_unavailable", str(exc))
        finally:
            if upstream is not None and upstream.content.at_eof():
                upstream.release()
            elif upstream is not None:
                upstream.close()  # unread or cut short: cancel the upstream request at once

    async def send(self) -> aiohttp.ClientResponse:
        """Send to the placed upstream; a refused connection is re-tried a few times (nothing was sent)."""
        p = self.s.provider
        assert self.placement is not None and self.s.session is not None
        data = self.upstream_body()
        headers = upstream_headers(self.request.headers, bool(data))
        headers.update(await p.credential.headers())
        if self.placement.pinned_resource:
            headers["X-HCU-Resource"] = self.placement.pinned_resource
        url = URL(p.upstream_url(self.placement.upstream, self.rest, self.query), encoded=True)
        for delay in (*CONNECT_RETRY_DELAYS_SEC, None):
            self.attempts += 1
            try:
                return await self.s.session.request(
                    self.request.method, url, headers=headers, data=data or None, allow_redirects=False
                )
            except aiohttp.ClientConnectorError as exc:
                if delay is None or isinstance(exc, aiohttp.ClientSSLError) or self.client.gone:
                    raise
                log.warning("task %s: cannot connect to %s (%s), retrying in %.2f s", self.task,
                            self.placement.upstream.label, type(exc).__name__, delay)
                self.in_attempt = False  # nothing went upstream: a client leaving now ends it
                await self.clock.sleep(delay)
                self.in_attempt = True
        raise AssertionError("unreachable")

    def upstream_body(self) -> bytes | bytearray:
        """The body as checked; for an Azure deployment, with the deployment's name as its one `model`."""
        assert self.placement is not None
        model = self.s.provider.upstream_model(self.placement.upstream)
        if model is None or not self.body or model == self.model:
            return self.body
        obj = orjson.loads(self.body)  # parse_json accepted it: every reader sees this same tree
        if not isinstance(obj, dict):
            return self.body
        replace_field(obj, "model", model)
        return orjson.dumps(obj)

    async def receive(self, up: aiohttp.ClientResponse) -> web.StreamResponse | None:
        """Classify the upstream's answer and pass it on; None means rate-limited, nothing sent yet."""
        assert self.placement is not None
        self.s.pool.saw_remaining(self.placement.upstream, up.headers.get("x-ratelimit-remaining-tokens"))
        self.s.pool.saw_limits(self.placement.upstream, self.s.provider.name, up.headers, self.clock.time())
        self.request_id = up.headers.get("x-request-id") or up.headers.get("request-id") or self.request_id
        if (encoding := undecoded_encoding(up.headers)) is not None:
            log.warning("task %s: upstream answered in Content-Encoding %s; refused", self.task, encoding[:40])
            self.outcome = "failed"
            return self.error(502, "upstream_unreadable", "the upstream answered in an encoding the gateway "
                              "cannot read")
        if up.content_type == "text/event-stream" and up.status < 300:
            self.watch = self.s.provider.watch(self.rest)
            result = await StreamRelay(up, self.watch, self.relay_io(up), self.client).run()
            return self.apply(result, up)
        data = await up.read()
        verdict = self.verdict(up, data)
        if verdict.signal is Signal.RATE_LIMIT:
            self.hint = hint_from_headers(up.headers, self.clock.time())
            self.hint = self.hint if self.hint is not None else verdict.retry_after_sec
            self.last_error = (up.status, data, up.headers)
            return None
        self.outcome = "success" if verdict.signal is Signal.SUCCESS else "failed"
        self.status = up.status
        return web.Response(status=up.status, body=self.scrub(data), headers=self.response_headers(up.headers))

    def verdict(self, up: aiohttp.ClientResponse, data: bytes) -> Verdict:
        p = self.s.provider
        if up.status >= 300:
            return p.error_verdict(up.status, data)
        parsed = loads_or_none(data) if data else None
        if parsed is None and data and self.generation:
            # a 2xx the gateway cannot read may still be a generation: it counts, so none is free
            log.warning("task %s: a %d answer that is not JSON; counted", self.task, up.status)
            return Verdict(Signal.SUCCESS)
        verdict = p.json_verdict(parsed)
        self.usage, self.response_id = verdict.usage, verdict.response_id
        return verdict

    def relay_io(self, up: aiohttp.ClientResponse) -> RelayIO:
        p = self.s.provider
        return RelayIO(self.request, self.response_headers(up.headers), self.scrub,
                       lambda code, message: p.error_event(self.rest, code, message),
                       self.s.config.drain_max_bytes, self.s.config.client_write_timeout_sec, self.task,
                       self.clock.monotonic)

    def apply(self, result: StreamResult, up: aiohttp.ClientResponse) -> web.StreamResponse | None:
        """Take what a relayed stream came to."""
        assert self.watch is not None
        if result.response is None:  # rate-limited before anything was forwarded
            hint = hint_from_headers(up.headers, self.clock.time())
            self.hint = hint if hint is not None else self.watch.retry_after_sec
            self.last_error = None
            return None
        self.outcome, self.status = result.outcome, result.status
        self.usage, self.response_id = self.watch.usage, self.watch.response_id
        if result.first_byte_at is not None:
            self.ttfb = result.first_byte_at - self.started
        return result.response

    def scrub(self, data: bytes | bytearray) -> bytes | bytearray:
        """Whatever the upstream echoes of the real credential never reaches the client."""
        return scrub(data, self.s.provider.credential.secret_values())

    def response_headers(self, headers: object, drop: frozenset[str] = DROP_RESPONSE_HEADERS) -> dict[str, str]:
        return client_headers(headers, self.s.provider.credential.secret_values(), drop)  # type: ignore[arg-type]

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
        if self.waited + delay > self.s.config.rate_limit_max_wait_sec:
            self.retry_after = delay
            return False
        log.info("task %s: rate-limited by %s, waiting %.2f s", self.task, upstream.label, delay)
        began = self.s.budget.begin_wait(self.task)
        try:
            await self.clock.sleep(delay)
        finally:  # a client that leaves mid-wait cancels the sleep: count what was actually waited
            waited = min(delay, self.clock.monotonic() - began)
            self.waited += waited
            self.s.budget.end_wait(self.task, began, waited)
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
        latency = self.clock.monotonic() - self.started
        if self.ttfb is None and self.status:
            self.ttfb = latency  # a plain (non-streamed) answer goes out in one piece at the end
        # A plain dict in TokenLogRow's field order: validating a row we just built from typed values would
        # cost more than the rest of the bookkeeping (readers validate with read_token_log).
        self.s.ledger.write(
            {
                "time": self.clock.time(),
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
            charged=self.reserved or self.attempts > 0, budgeted=self.reserved,
        )
