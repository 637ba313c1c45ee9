"""The gateway core: one aiohttp app per provider, routing `/t/<task>/<rest>` to an `Exchange` and serving
`GET /healthz`; one listener per port over one shared `GatewayState`.

Before anything is forwarded a request passes four checks, cheapest first: a well-formed task scope, the
scope's secret when per-task secrets are on (else 403, no row, no state: a guest cannot touch another
task; counted per peer address), the scope's gate (a scope at its token-log ceiling or flooding the gateway
with refused requests is refused before anything of it is read: `hcu.gateway.ledger`), and the provider's
allow-list (else 404 in the provider's error shape, logged, never forwarded). A peer flooding the first two
checks gets 429s the same way. Every 429 of the gate (and a ceiling's 403) is held `flood_delay_sec` first,
so a client that ignores Retry-After gets one answer per connection per that long.

`/healthz` has two levels. Anyone learns that the gateway is up. The details (budget, token log, scope key
id, upstreams and what their answers said of their rate limits, how many tasks it serves) need `?task=<scope>`
(with per-task secrets on, and that scope's secret as the credential), or a connection from this host
(`hcu.gateway.host_peer`: loopback, or any address of this host, such as the host calling its own bridge
address). A scope's state always needs its secret when secrets are on. This host may also ask `?waits=<prefix>`:
the cumulative rate-limit waits of every scope starting with the prefix that has waited (the queue's admission
reads its run's).
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import orjson
from aiohttp import web

from hcu.gateway.exchange import Exchange
from hcu.gateway.host_peer import from_this_host
from hcu.gateway.ledger import GateRefusal
from hcu.gateway.listener import serve
from hcu.gateway.log_redaction import redact_logs
from hcu.gateway.observed_limits import NOTES
from hcu.gateway.options import GatewayConfig
from hcu.gateway.refusals import NO_SCOPE, NO_SECRET
from hcu.gateway.routes import match_route, valid_scope
from hcu.gateway.state import STATE, GatewayState

__all__ = ["GatewayConfig", "GatewayState", "build_app", "serve"]

HOUSEKEEPING_SEC = 1.0
"""How often rows waiting in memory are offered to the token log again, and ended refusal intervals written."""
log = logging.getLogger("hcu.gateway")


async def handle(request: web.Request) -> web.StreamResponse:
    s = request.app[STATE]
    path = request.rel_url.raw_path
    task, sep, rest = path[3:].partition("/") if path.startswith("/t/") else ("", "", "")
    if not sep or not valid_scope(task):
        refusal = GateRefusal(404, "not_found", "not found: use /t/<task>/<path> or GET /healthz")
        return await refuse(request, "", "", refusal, NO_SCOPE)
    if s.scope_guard is not None and not s.scope_guard.allows(task, request.headers, request.query):
        refusal = GateRefusal(403, "invalid_task_secret", f"this credential does not hold task scope {task}")
        return await refuse(request, task, rest, refusal, NO_SECRET)
    if (refusal := s.ledger.gate(task, "/" + rest)) is not None:
        return await answer(request, rest, refusal, delay=True)
    return await Exchange(s, request, task, rest, match_route(s.provider.routes, request.method, rest)).run()


async def refuse(request: web.Request, task: str, rest: str, refusal: GateRefusal, kind: str) -> web.Response:
    """A refusal no scope can be held to: counted per peer address (logged while it is one of the peer's first
    few in its interval), and a 429 once the peer floods."""
    s = request.app[STATE]
    left = s.ledger.refusals.refuse_peer(request.remote or "?", kind)
    if left is None:
        if kind == NO_SECRET and s.ledger.refusals.peer_is_quiet(request.remote or "?"):
            log.warning("task %s: refused %s /%s without the scope's secret", task, request.method, rest[:200])
        return await answer(request, rest, refusal, delay=False)
    flood = GateRefusal(429, "too_many_refused_requests", f"{s.config.flood_refusals_per_interval} "
                        f"refused requests from this address in {s.config.refusal_interval_sec:g} s", left)
    return await answer(request, rest, flood, delay=True)


async def answer(request: web.Request, rest: str, refusal: GateRefusal, *, delay: bool) -> web.Response:
    """Send a refusal in the provider's error shape, nothing of the request read: a body still arriving closes
    the connection rather than being read to its end."""
    s = request.app[STATE]
    if delay and s.config.flood_delay_sec:
        await asyncio.sleep(s.config.flood_delay_sec)
    body = s.provider.error_body(rest, refusal.status, refusal.code, refusal.message)
    response = web.Response(status=refusal.status, body=body, headers=refusal.headers(),
                            content_type="application/json")
    if not request.content.is_eof():
        response.force_close()
    return response


async def healthz(request: web.Request) -> web.Response:
    s = request.app[STATE]
    task = request.query.get("task")
    if task is not None:
        if not valid_scope(task):
            return web.json_response({"error": "task: expected a task scope"}, status=400)
        if s.scope_guard is not None and not s.scope_guard.allows(task, request.headers, {}):
            return web.json_response({"error": f"the state of task scope {task} needs its secret"}, status=403)
    elif not from_this_host(request):
        return web.json_response({"status": "up"})
    body: dict[str, object] = {
        "status": "up",
        "provider": s.provider.name,
        "max_requests_per_task": s.config.max_requests_per_task,
        "rate_limit_max_wait": s.config.rate_limit_max_wait_sec,
        "upstreams": [u.label for u in s.pool.upstreams],
        "tasks": len(s.budget.tasks),
        "scope_secrets": s.scope_guard is not None,
        "scope_key_id": s.scope_guard.key_id if s.scope_guard is not None else None,
        "token_log": s.token_log.status(),
        "upstream_limits": {u.label: u.observed.model_dump() if u.observed else None for u in s.pool.upstreams},
        "upstream_limits_note": NOTES.get(s.provider.name),
        "refusals": s.ledger.status(),
    }
    if task is not None:
        body["task"] = s.budget.view(task).model_copy(update=s.ledger.view(task)).model_dump()
    if (prefix := request.query.get("waits")) is not None and from_this_host(request):
        body["rate_limit_waits"] = {scope: waits.model_dump() for scope, waits in s.budget.waits(prefix).items()}
    return web.Response(body=orjson.dumps(body), content_type="application/json")


async def _lifecycle(app: web.Application):
    s = app[STATE]
    timeout = aiohttp.ClientTimeout(
        total=None, sock_connect=s.config.upstream_connect_timeout_sec,
        sock_read=s.config.upstream_idle_timeout_sec,
    )
    # DummyCookieJar: cookies set by the upstream for one task must never ride along with another's requests
    s.session = aiohttp.ClientSession(
        cookie_jar=aiohttp.DummyCookieJar(),
        timeout=timeout,
        connector=aiohttp.TCPConnector(limit=0),
        skip_auto_headers=("User-Agent",),
    )
    housekeeping = asyncio.create_task(_housekeeping(s))
    yield
    housekeeping.cancel()
    await s.session.close()
    s.ledger.close()
    s.token_log.close()


async def _housekeeping(s: GatewayState) -> None:
    while True:
        await asyncio.sleep(HOUSEKEEPING_SEC)
        s.ledger.sweep()
        if s.token_log.pending or not s.token_log.writable:
            s.token_log.flush()


async def _end_exchanges(app: web.Application) -> None:
    """At shutdown, before the server waits for its handlers: end every request still being served (one
    reading a left client's answer may have minutes to go); each writes its row."""
    for handler in list(app[STATE].exchanges):
        handler.cancel()


def build_app(state: GatewayState) -> web.Application:
    """The gateway app; serve it with `hcu.gateway.listener.serve`."""
    app = web.Application()
    app[STATE] = state
    redact_logs(state.provider.credential.secret_values)
    app.cleanup_ctx.append(_lifecycle)
    app.on_shutdown.append(_end_exchanges)
    app.router.add_get("/healthz", healthz)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app
