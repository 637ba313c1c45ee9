"""parse_events on output recorded from the real CLIs (codex 0.171.0, claude-code 2.1.332, gemini-cli 0.61.0,
grok 0.2.111) run against hcu's gateways in front of the scripted policy: success, budget refusal (the
gateway's 402), persistent 429 (the gateway gave up waiting)."""

from __future__ import annotations

import pytest

from hcu.osworld.agents import get_adapter
from hcu.osworld.agents.base import protocol_word
from hcu.osworld.agents.events import NO_FINAL_EVENT
from tests.agents.conftest import fixture_text

PREFIX = {"codex": "codex", "claude-code": "claude", "gemini-cli": "gemini", "grok-build": "grok"}
# Grok 0.2.111 does not put tool calls in its streaming-json output.
TOOL_CALLS = {"codex": 2, "claude-code": 2, "gemini-cli": 2, "grok-build": 0}


@pytest.mark.parametrize("agent", list(PREFIX))
def test_success(agent):
    out = get_adapter(agent).parse_events(fixture_text(f"{PREFIX[agent]}-success.jsonl"))
    assert out.succeeded and out.error is None
    assert out.final_message == "Typed it.\nTASK_COMPLETE" and out.protocol_word == "TASK_COMPLETE"
    assert not out.refused_budget
    assert out.tool_calls == TOOL_CALLS[agent]
    assert out.session_id
    kinds = [t["kind"] for t in out.turns]
    assert kinds.count("message") == 1 and "usage" in kinds
    assert kinds.count("tool_call") == TOOL_CALLS[agent]


@pytest.mark.parametrize("agent", list(PREFIX))
def test_budget_refusal(agent):
    out = get_adapter(agent).parse_events(fixture_text(f"{PREFIX[agent]}-gw-loop.jsonl"))
    assert out.refused_budget and not out.succeeded
    assert "max_model_calls" in out.error and out.protocol_word is None


@pytest.mark.parametrize("agent", list(PREFIX))
def test_rate_limited_turn_is_a_failed_turn_and_nothing_more(agent):
    """whether the turn ended on a rate limit is the gateway's verdict (its token-log rows),
    not the CLI's wording: the parsed outcome only says the turn failed."""
    out = get_adapter(agent).parse_events(fixture_text(f"{PREFIX[agent]}-gw-thr.jsonl"))
    assert not out.succeeded and not out.refused_budget and out.error
    assert out.final_message is None
    assert "ended_on_rate_limit" not in out.model_dump()


@pytest.mark.parametrize("agent", list(PREFIX))
def test_cut_off_stream_is_a_failure(agent):
    """A killed CLI leaves no final event (and maybe half a line): never read as a success."""
    lines = fixture_text(f"{PREFIX[agent]}-success.jsonl").splitlines()
    out = get_adapter(agent).parse_events("\n".join(lines[:-1]) + "\n" + lines[-1][:15])
    assert not out.succeeded and out.error == NO_FINAL_EVENT
    assert not out.refused_budget


@pytest.mark.parametrize("message,word", [
    ("Done.\nTASK_COMPLETE", "TASK_COMPLETE"),
    ("The file does not exist.\nTASK_INFEASIBLE", "TASK_INFEASIBLE"),
    ("Which folder do you mean?\nASK_USER", "ASK_USER"),
    ("Not TASK_COMPLETE yet; it is TASK_INFEASIBLE", "TASK_INFEASIBLE"),
    ("Renamed it.\n**TASK_COMPLETE**\n", "TASK_COMPLETE"),
    ("No adapter here.\nTASK_INFEASIBLE.", "TASK_INFEASIBLE"),
    ("Done; no need for TASK_INFEASIBLE.", None),
    ("TASK_INFEASIBLE was my first guess, but it worked.", None),
    ("Done.\nMY_TASK_COMPLETE", None),
    ("All done.", None),
    (None, None),
])
def test_protocol_word(message, word):
    """the word counts only where the protocol puts it, at the end of the final message."""
    assert protocol_word(message) == word
