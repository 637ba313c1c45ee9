"""No upstream credential and no scope secret in anything the collect phase or the export writes, wherever
they were salted: the guest's call log and the CLI's transcript (brought home through the in-guest API), the
turns' events, the token log's rows; a transcript's inline images stay in the guest."""

from __future__ import annotations

import base64

import orjson
import pytest

from hcu.osworld.agents import get_adapter
from hcu.osworld.evidence.collect import collect_evidence
from hcu.osworld.evidence.osworld_export import export_run
from hcu.osworld.guest.api import GuestAPI
from tests.agents.live import desktop_container
from tests.evidence.live_agent import guest_address
from tests.evidence.record_fixtures import FIXTURES, TOKEN_LOG
from tests.evidence.test_kept_files import kept_run

pytestmark = [pytest.mark.docker]
AGENT = "grok-build"
SCOPE_SECRET = "hcu-scope-secret-salted-0f1e2d3c4b5a"
UPSTREAM = "hcu-upstream-credential-salted-99887766"
KEY_SHAPED = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123"
SALT = f" [env: HCU_GATEWAY_TOKEN={SCOPE_SECRET} OSW_OPENAI_UPSTREAM_TOKEN={UPSTREAM} {KEY_SHAPED}]"
IMAGE = base64.b64encode(b"\x89PNG" + bytes(range(256)) * 40).decode()


def salted_json_lines(data: bytes, field: str) -> bytes:
    """Every JSON line with SALT appended to one of its string fields, where it has one."""
    out = []
    for line in data.splitlines():
        value = orjson.loads(line)
        if isinstance(value, dict) and isinstance(value.get(field), str):
            value[field] += SALT
        out.append(orjson.dumps(value))
    return b"\n".join(out) + b"\n"


def test_no_credential_or_scope_secret_in_evidence_or_export(tmp_path, monkeypatch):
    monkeypatch.setenv("OSW_OPENAI_UPSTREAM_TOKEN", UPSTREAM)
    result_dir, ctx, context = kept_run(AGENT, tmp_path)
    fixture = FIXTURES / AGENT
    for events in result_dir.glob("phase-agent-turn-*-events.jsonl"):
        events.write_bytes(salted_json_lines(events.read_bytes(), "data"))
    token_log = tmp_path / TOKEN_LOG
    rows = [orjson.loads(line) for line in (fixture / TOKEN_LOG).read_bytes().splitlines()]
    token_log.write_bytes(b"".join(orjson.dumps({**r, "upstream_request_id": UPSTREAM}) + b"\n" for r in rows))
    transcript = get_adapter(AGENT).transcript(ctx)
    chat = salted_json_lines((fixture / "transcript.jsonl").read_bytes(), "content")
    chat += orjson.dumps({"type": "user", "content": [{"type": "image", "url": f"data:image/png;base64,{IMAGE}"}]})
    for path in [result_dir / "calls.jsonl", result_dir / "transcript.jsonl"]:
        path.unlink()  # brought home again from the guest below
    with desktop_container("test-evidence", "privacy") as guest:
        api = GuestAPI(f"http://{guest_address(guest)}:5000", timeout_sec=60)
        api.upload(f"{ctx.call_log_dir}/calls.jsonl", salted_json_lines((fixture / "calls.jsonl").read_bytes(),
                                                                        "result"))
        for shot in (fixture / "steps").iterdir():
            api.upload(f"{ctx.call_log_dir}/shots/{shot.name}", shot.read_bytes())
        api.upload(transcript.guest_path, chat + b"\n")
        trajectory = collect_evidence(api, result_dir, agent=AGENT, ctx=ctx, agent_version=context["agent_version"],
                                      token_log=token_log, ended="completed", secrets=[SCOPE_SECRET])
    assert trajectory.extra["collect_errors"] == [] and len(list((result_dir / "steps").iterdir())) == 4
    assert "[redacted]" in (result_dir / "trajectory.json").read_text(), "the salt reached the trajectory"
    kept_transcript = (result_dir / "transcript.jsonl").read_text()
    assert IMAGE[:100] not in kept_transcript and "[omitted]" in kept_transcript, "inline images stay in the guest"
    (result_dir / "result.json").write_bytes(orjson.dumps({"status": "completed", "score": 1.0, "task_id": "t",
                                                           "task_domain": "os", "model": ctx.model}))
    run_dir = tmp_path / "run"
    (run_dir / "tasks").mkdir(parents=True)
    result_dir.rename(run_dir / "tasks" / "t")
    export_run(run_dir, tmp_path / "export", action_space="computer_use", observation_type="mcp")
    written = [*(run_dir / "tasks" / "t").glob("*.json*"), *(tmp_path / "export").rglob("*")]
    for path in (p for p in written if p.is_file() and not p.name.startswith("phase-agent-turn-")):
        data = path.read_bytes()
        for secret in (SCOPE_SECRET, UPSTREAM, KEY_SHAPED):
            assert secret.encode() not in data, (secret, path)
