"""No credential or scope secret reaches a page, a served file or the static export. The sample run is salted:
its scope key file, every attempt's scope secret (in logs, stderr, events, meta.json and the trajectory) and a
provider-style key in a log; every page and file the viewer offers is fetched and searched for all of them."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from hcu.osworld.view.data import RunData
from hcu.osworld.view.redact import SHOWN_AS, Redactor
from hcu.osworld.view.server import make_app
from hcu.osworld.view.site import Site
from tests.view.conftest import export_of
from tests.view.sample_run import SampleRun, file_list

PROVIDER_KEY = "sk-proj-" + "Q7x" * 12
HREF = re.compile(rb'(?:href|src)=\\?"(/[^"#\\]*)')
"""Links in the HTML and in the rows a table ships as JSON (`href=\"...`)."""


@pytest.fixture(scope="module")
def salted(sample: SampleRun) -> list[str]:
    """The run's secrets, plus a provider key and a bearer token written into a runner log."""
    key = sample.attempts[0].key
    log = sample.run_dir / "logs" / f"{key}.log"
    log.write_text(log.read_text() + f"upstream said: OPENAI_API_KEY={PROVIDER_KEY}\n"
                   f"x-api-key: {PROVIDER_KEY}\nAuthorization: Bearer eyJhbGciOi.eyJzdWIiOiJ4.c2lnbmF0dXJl\n")
    assert len(sample.secrets) > 10, "the key and every attempt's scope secret"
    return [*sample.secrets, PROVIDER_KEY, "eyJhbGciOi.eyJzdWIiOiJ4.c2lnbmF0dXJl"]


def test_the_redactor_masks_each_kind_of_secret(sample: SampleRun, salted: list[str]) -> None:
    redactor = Redactor.for_run(sample.run_dir, [])
    for secret in salted:
        assert secret not in redactor.text(f"a line with {secret} in it"), secret
    masked = redactor.value({"gateway_token": "plain", "max_tokens": 5, "note": f"TOKEN={salted[1]}"})
    assert masked == {"gateway_token": SHOWN_AS, "max_tokens": 5, "note": f"TOKEN={SHOWN_AS}"}
    kept = "token_log: /runs/x/gateway-tokens.jsonl, input_tokens: 12, scope_key_id: 3f2a"
    assert redactor.text(kept) == kept, "names that only look like secrets keep their values"


@pytest.fixture
async def base_url(sample: SampleRun, other_sample: SampleRun, salted: list[str]) -> AsyncIterator[str]:
    site = Site(RunData(sample.run_dir), RunData(other_sample.run_dir))
    async with TestServer(make_app(site), host="127.0.0.1") as server:
        yield f"http://127.0.0.1:{server.port}"


async def crawl(session: ClientSession, base: str) -> dict[str, bytes]:
    """Every page and file reachable by links from the index."""
    seen: dict[str, bytes] = {}
    todo = ["/"]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        async with session.get(base + path) as response:
            assert response.status == 200, path
            seen[path] = await response.read()
        if response.content_type == "text/html":
            todo += [link.decode() for link in HREF.findall(seen[path]) if link.decode() not in seen]
    return seen


async def test_no_page_or_served_file_shows_a_secret(sample: SampleRun, salted: list[str], base_url: str) -> None:
    async with ClientSession() as session:
        bodies = await crawl(session, base_url)
        for path in file_list(sample.run_dir):  # every file, linked or not
            async with session.get(f"{base_url}/files/{path.relative_to(sample.run_dir)}") as response:
                bodies[str(path)] = await response.read()
    assert sum(1 for p in bodies if p.startswith("/tasks/")) == len(sample.attempts)
    assert any(p.endswith(".log") for p in bodies) and any("/steps/" in p for p in bodies)
    for where, body in bodies.items():
        for secret in salted:
            assert secret.encode() not in body, f"{where} shows a secret"
    assert SHOWN_AS.encode() in bodies[f"/files/logs/{sample.attempts[0].key}.log"]


def test_the_export_holds_no_secret(sample: SampleRun, other_sample: SampleRun, salted: list[str],
                                    tmp_path: Path) -> None:
    out = export_of(sample, other_sample, tmp_path / "site")
    files = file_list(out)
    assert any(f.name == "gateway-scope.key" for f in file_list(sample.run_dir))
    assert not any(f.suffix == ".key" for f in files)
    for path in files:
        data = path.read_bytes()
        for secret in salted:
            assert secret.encode() not in data, f"{path} holds a secret"
