"""What the pages say, read from their HTML: the repeat figures, a stale summary, a screenshot path that leaves
its attempt, a trajectory as earlier hcu versions wrote it, a run still in progress, the recording (served in
ranges, as a video player asks for it)."""

from __future__ import annotations

import os
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from hcu.osworld.summary.run_summary import summarize
from hcu.osworld.view.data import RunData
from hcu.osworld.view.links import ServedLinks
from hcu.osworld.view.server import make_app
from hcu.osworld.view.site import Site
from hcu.record_io import write_json
from tests.summary.baseline_run import make_run, make_sweep
from tests.view.sample_run import Attempt, SampleRun, build_run

LINKS = ServedLinks()


def table_rows(html: str, table_id: str) -> list[dict]:
    """The rows a page ships for one of its tables (viewer.js lists them)."""
    start = html.index(f'<script type="application/json" id="{table_id}-rows">')
    payload = html[html.index(">", start) + 1:html.index("</script>", start)]
    return orjson.loads(payload)


def test_the_run_page_shows_repeats_cost_and_every_attempt(sample: SampleRun) -> None:
    html = Site(RunData(sample.run_dir)).index(LINKS)
    assert "k = 2" in html and "pass^k" in html and "run-to-run sd" in html and "$1.25" in html
    rows = table_rows(html, "tasks")
    assert [row["d"]["task"] for row in rows] == [a.task_id for a in sample.attempts]
    assert all(f'href="/tasks/{a.key}"' in row["h"] for row, a in zip(rows, sample.attempts, strict=True))
    assert "summary/summary.json" not in html, "a current summary: no staleness warning"


def test_a_summary_older_than_a_result_is_flagged(tmp_path: Path) -> None:
    sample = build_run(tmp_path, "stale", [Attempt("t-1", "pass")])
    summary = sample.run_dir / "summary" / "summary.json"
    os.utime(summary, (1_700_000_000, 1_700_000_000))
    assert "is older than the newest result" in Site(RunData(sample.run_dir)).index(LINKS)


@pytest.mark.parametrize("where", ["image part", "extra (ATIF-v1.5)"])
def test_a_screenshot_path_leaving_its_attempt_is_not_linked(tmp_path: Path, where: str) -> None:
    sample = build_run(tmp_path, "escape", [Attempt("t-1", "pass", steps=1)])
    path = sample.run_dir / "tasks" / "t-1" / "trajectory.json"
    body = orjson.loads(path.read_bytes())
    result = body["steps"][1]["observation"]["results"][0]
    if where == "image part":
        result["content"][1]["source"]["path"] = "../../config.json"
    else:
        result["content"], result["extra"]["screenshot"] = "clicked", "../../config.json"
    write_json(path, body)
    html = Site(RunData(sample.run_dir)).attempt("this", "tasks", "t-1", LINKS)
    assert html is not None and "leaves the attempt folder" in html and "/files/config.json" not in html


def test_a_trajectory_of_an_earlier_hcu_shows_its_screenshots_and_click_marks(tmp_path: Path) -> None:
    """ATIF-v1.5 as hcu wrote it before: each result's screenshot in `extra.screenshot`, its content a string."""
    sample = build_run(tmp_path, "v15", [Attempt("t-1", "pass", steps=2)])
    path = sample.run_dir / "tasks" / "t-1" / "trajectory.json"
    current = Site(RunData(sample.run_dir)).attempt("this", "tasks", "t-1", LINKS)
    body = orjson.loads(path.read_bytes())
    body["schema_version"] = "ATIF-v1.5"
    for step in body["steps"][1:]:
        for result in step["observation"]["results"]:
            text, image = result["content"]
            result["content"], result["extra"]["screenshot"] = text["text"], image["source"]["path"]
    write_json(path, body)
    html = Site(RunData(sample.run_dir)).attempt("this", "tasks", "t-1", LINKS)
    assert current is not None and html is not None
    shots = re.findall(r'<img src="(/files/tasks/t-1/steps/[^"]+)"', html)
    assert len(shots) == 4 and shots == re.findall(r'<img src="(/files/tasks/t-1/steps/[^"]+)"', current)
    assert html.count('class="mark"') == current.count('class="mark"') == 2
    assert "clicked at" in html and "[image]" not in current


def test_a_run_in_progress_opens(tmp_path: Path) -> None:
    sample = build_run(tmp_path, "live", [Attempt("t-1", "no_result"), Attempt("t-2", "pass")])
    shutil.rmtree(sample.run_dir / "summary")
    site = Site(RunData(sample.run_dir))
    assert "live tally" in site.index(LINKS)
    html = site.attempt("this", "tasks", "t-1", LINKS)
    assert html is not None and "last phase" in html and "agent" in html


async def test_the_recording_is_offered_and_served_in_ranges(sample: SampleRun) -> None:
    key = next(a.key for a in sample.attempts if a.outcome == "pass")
    async with TestServer(make_app(Site(RunData(sample.run_dir))), host="127.0.0.1") as server, \
            ClientSession() as session:
        base = f"http://127.0.0.1:{server.port}"
        async with session.get(f"{base}/tasks/{key}") as response:
            assert f'<video controls preload="metadata" src="/files/tasks/{key}/recording.mp4"' in await response.text()
        async with session.get(f"{base}/files/tasks/{key}/recording.mp4", headers={"Range": "bytes=0-7"}) as response:
            assert response.status == 206 and response.headers["Content-Type"] == "video/mp4"
            assert await response.read() == (sample.run_dir / "tasks" / key / "recording.mp4").read_bytes()[:8]


def test_the_do_nothing_baseline_stands_beside_the_score(tmp_path: Path) -> None:
    sweep, ids = make_sweep(tmp_path)
    run_dir = make_run(tmp_path, ids)
    summarize(run_dir, baseline_dir=sweep)
    html = Site(RunData(run_dir)).index(LINKS)
    assert "Without 2 passing untouched" in html and "<b>60.0%</b>" in html
    assert 'Pass untouched (the do-nothing baseline: they say nothing about the agent) (2)' in html
    assert "Untouched score unknown (never assumed 0) (3)" in html and "not in the sweep" in html
    chart = html[html.index('<svg viewBox'):html.index("</svg>") + len("</svg>")]
    labels = [g.get("data-label") for g in ET.fromstring(chart).iter("g") if g.get("data-mark") == "estimate"]
    assert labels == ["all tasks", "without 2 passing untouched", "chrome", "os"]
    assert "The do-nothing baseline beside the score" not in html, "not under More from summary.json: placed"


def test_without_a_trajectory_the_cli_s_events_stand_in(tmp_path: Path) -> None:
    sample = build_run(tmp_path, "events", [Attempt("t-1", "pass")])
    folder = sample.run_dir / "tasks" / "t-1"
    (folder / "trajectory.json").unlink()
    usage = {"turn": 2, "kind": "usage", "usage": {"input_tokens": 7}}
    with (folder / "agent.jsonl").open("ab") as f:
        f.write(b"not json\n" + orjson.dumps(usage) + b"\n" + orjson.dumps({"turn": "x"}) + b"\n")
    page = Site(RunData(sample.run_dir)).attempt("this", "tasks", "t-1", LINKS)
    assert page is not None and "The CLI's events from agent.jsonl (3):" in page
    assert '<pre class="message">working</pre>' in page and '<code class="fn">click</code>' in page
    assert "turn 2" in page and "input_tokens" in page, "an item of another kind shows its fields"


def test_the_attempt_page_says_whether_its_final_desktop_was_kept_and_how_to_open_it(tmp_path: Path) -> None:
    sample = build_run(tmp_path, "kept", [Attempt("t-1", "fail"), Attempt("t-2", "pass"), Attempt("t-3", "fail")])
    for task, record in (("t-1", {"kept": True, "path": "x", "bytes": 176_251_960, "save_sec": 1.4,
                                  "holds": ["memory", "devices", "disk"]}),
                         ("t-2", {"kept": False, "reason": "scored 1 (keep_final_desktop zeros keeps the others)"})):
        meta_path = sample.run_dir / "tasks" / task / "meta.json"
        write_json(meta_path, {**orjson.loads(meta_path.read_bytes()), "final_desktop": record})
    site = Site(RunData(sample.run_dir))
    kept = site.attempt("this", "tasks", "t-1", LINKS)
    assert kept is not None and "Kept in <code>tasks/t-1/final-desktop/</code>: 176,251,960 bytes" in kept
    assert f"python -m hcu.osworld.open_desktop {sample.run_dir} t-1</code>" in kept
    assert f"python -m hcu.osworld.regrade {sample.run_dir} --tasks t-1</code>" in kept
    let_go = site.attempt("this", "tasks", "t-2", LINKS)
    assert let_go is not None and "Not kept: scored 1 (keep_final_desktop zeros keeps the others)" in let_go
    older = site.attempt("this", "tasks", "t-3", LINKS)
    assert older is not None and "meta.json says nothing of a final desktop" in older
