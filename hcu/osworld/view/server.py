"""The served viewer (aiohttp): pages rendered on request, run files checked by `paths.resolve_in_run` and
text files redacted on the way out. Bound to loopback unless told otherwise; on loopback, requests naming
another host are refused (a page elsewhere cannot reach the viewer through DNS rebinding)."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Awaitable, Callable

from aiohttp import web

from hcu.osworld.view.attempt_data import Area
from hcu.osworld.view.links import ServedLinks, Side
from hcu.osworld.view.paths import PathRefused, content_type, is_text, resolve_in_run
from hcu.osworld.view.site import STATIC_FILES, Site, static_bytes

SITE = web.AppKey("site", Site)
LOOPBACK_ONLY = web.AppKey("loopback_only", bool)
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self'; "
                               "media-src 'self'; script-src 'self'; connect-src 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
"""Pages and files come from the viewer alone; nothing it serves may load from or report to elsewhere."""
LINKS = ServedLinks()
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse a foreign Host on a loopback viewer; add the security headers to every answer."""
    if request.app[LOOPBACK_ONLY] and not is_loopback(request.url.host or ""):
        raise web.HTTPForbidden(text="this viewer answers requests for localhost only\n")
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        exc.headers.update(HEADERS)
        raise
    response.headers.update(HEADERS)
    return response


async def _page(render: Callable[[], str | None]) -> web.Response:
    html = await asyncio.to_thread(render)
    if html is None:
        raise web.HTTPNotFound(text="no such page in this run\n")
    return web.Response(text=html, content_type="text/html", charset="utf-8")


def _side(request: web.Request) -> Side:
    return "other" if request.path.startswith("/other/") else "this"


async def index(request: web.Request) -> web.Response:
    site = request.app[SITE]
    return await _page(lambda: site.index(LINKS))


async def attempt(request: web.Request) -> web.Response:
    site, name = request.app[SITE], request.match_info["name"]
    area: Area = "tasks" if request.match_info["area"] == "tasks" else "retries"
    return await _page(lambda: site.attempt(_side(request), area, name, LINKS))


async def compare(request: web.Request) -> web.Response:
    site = request.app[SITE]
    return await _page(lambda: site.compare(LINKS))


async def compare_task(request: web.Request) -> web.Response:
    site, key = request.app[SITE], request.match_info["key"]
    return await _page(lambda: site.compare_task(key, LINKS))


async def run_file(request: web.Request) -> web.StreamResponse:
    run = request.app[SITE].run(_side(request))
    if run is None:
        raise web.HTTPNotFound(text="no compared run\n")
    try:
        path = resolve_in_run(run.run_dir, request.match_info["path"])
    except PathRefused as exc:
        raise web.HTTPNotFound(text=f"not served: {exc}\n") from None
    if not is_text(path):
        return web.FileResponse(path, headers={"Content-Type": content_type(path)})
    data = await asyncio.to_thread(path.read_bytes)
    redacted = run.redactor.json_text(data) if path.suffix in (".json", ".jsonl") else run.redactor.bytes(data)
    return web.Response(body=redacted, content_type=content_type(path), charset="utf-8")


async def static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in STATIC_FILES:
        raise web.HTTPNotFound()
    kind = "text/css" if name.endswith(".css") else "text/javascript"
    return web.Response(body=static_bytes(name), content_type=kind, charset="utf-8")


def make_app(site: Site, *, loopback_only: bool = True) -> web.Application:
    app = web.Application(middlewares=[guard])
    app[SITE], app[LOOPBACK_ONLY] = site, loopback_only
    app.router.add_get("/", index)
    app.router.add_get("/static/{name}", static)
    for prefix in ("", "/other"):
        app.router.add_get(prefix + "/{area:tasks|retries}/{name}", attempt)
        app.router.add_get(prefix + "/files/{path:.+}", run_file)
    app.router.add_get("/compare", compare)
    app.router.add_get("/compare/{key}", compare_task)
    return app
