"""Record the kept files of a real CLI run per agent into fixtures/<agent>/ (the fast tests build trajectories
from them offline): `python -m tests.evidence.record_fixtures` (Docker, the test desktop and artifacts/).

The run is the real tier's: the scripted policy of test_real_clis, its rate limit resumed once."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import orjson

from hcu.osworld.evidence.guest_fetch import CALL_LOG_NAME, TRANSCRIPT_NAME
from hcu.osworld.records.layout import TURN_EVENTS
from tests.evidence.live_agent import live_run, policy
from tests.evidence.played import AGENTS, FINAL, STEPS, THROTTLED

FIXTURES = Path(__file__).parent / "fixtures"
CONTEXT = "context.json"
TOKEN_LOG = "gateway-tokens.jsonl"


def record(agent: str) -> None:
    with tempfile.TemporaryDirectory(prefix="hcu-fixture-") as tmp, \
            live_run(agent, Path(tmp), policy(STEPS, final=FINAL, faults=[THROTTLED])) as run:
        outcome = run.run_agent()
        run.collect(outcome.termination_reason)
        out = FIXTURES / agent
        shutil.rmtree(out, ignore_errors=True)
        (out / "steps").mkdir(parents=True)
        turns = sorted(run.result_dir.glob(TURN_EVENTS.format(turn="*")))
        for path in [*turns, run.result_dir / CALL_LOG_NAME, run.result_dir / TRANSCRIPT_NAME,
                     *(run.result_dir / "steps").iterdir()]:
            if path.is_file():
                shutil.copyfile(path, out / path.relative_to(run.result_dir))
        rows = [line for line in run.token_log.read_bytes().splitlines() if orjson.loads(line)["task"] == run.ctx.scope]
        (out / TOKEN_LOG).write_bytes(b"\n".join(rows) + b"\n")
        context = run.ctx.model_dump(exclude={"gateway_token", "base_instructions", "profile_instructions"})
        (out / CONTEXT).write_bytes(orjson.dumps({
            "ctx": context, "agent_version": run.version, "turns": outcome.turns,
            "turn_ended_at": {p.name: p.stat().st_mtime for p in turns},
        }, option=orjson.OPT_INDENT_2))
        assert run.credential.secret is None or not any(
            run.credential.secret.encode() in p.read_bytes() for p in out.rglob("*") if p.is_file())


def main(argv: list[str]) -> int:
    for agent in argv or AGENTS:
        record(agent)
        print(f"recorded {FIXTURES / agent}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
