"""Records older versions of hcu wrote, and torn ones, in the viewer: summary.json from the first summarize and
from the last before its model still make the run page's figures; a torn or foreign summary.json is said to be
so in one line and the live tally stands in; a newer summarize's key is shown as it is; meta.json from before
its guest spec and gateway health were typed still reads. Also the comparison's rule for a discordant task."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import orjson
import pytest

from hcu.osworld.attempt.meta import AttemptMeta
from hcu.osworld.view.compare import compare_runs
from hcu.osworld.view.data import RunData
from hcu.osworld.view.links import ServedLinks
from hcu.osworld.view.site import Site
from hcu.record_io import read_record, write_json
from tests.view.sample_run import Attempt, SampleRun, build_run

SUMMARIES = Path(__file__).parents[1] / "summary" / "data"
DATA = Path(__file__).parent / "data"
LINKS = ServedLinks()


@pytest.fixture
def small(tmp_path: Path) -> SampleRun:
    return build_run(tmp_path, "small", [Attempt("t-1", "pass"), Attempt("t-2", "fail")])


def index_with_summary(sample: SampleRun, body: bytes) -> str:
    (sample.run_dir / "summary" / "summary.json").write_bytes(body)
    return Site(RunData(sample.run_dir)).index(LINKS)


def test_summary_json_of_the_first_summarize_makes_the_figures(small: SampleRun) -> None:
    html = index_with_summary(small, (SUMMARIES / "summary-936a9d7.json").read_bytes())
    assert "live tally" not in html and "does not read" not in html
    assert "25.0% – 58.3%" in html, "the bounds as that summarize wrote them"
    assert "not in summary" in html, "a cost the file does not hold is not shown as unknown"
    assert "k = " not in html and "More from summary.json" not in html


def test_summary_json_from_before_the_model_makes_the_figures(small: SampleRun) -> None:
    html = index_with_summary(small, (SUMMARIES / "summary-8cc9995.json").read_bytes())
    assert "live tally" not in html
    assert "k = 2" in html and "$2.75" in html and "run-to-run sd" in html and "0.1667" in html
    assert "get_vm_file" in html, "the task scored although a getter read nothing"
    for label in ("Spent without a valid result", "Rate-limit waits"):  # figures that summarize did not compute
        assert re.search(f'<div class="card-label">{label}</div><div class="card-value">not in summary</div>', html)


@pytest.mark.parametrize("body, reason", [
    (b'{"run_id": "small", "tas', "summary/summary.json: not JSON"),
    (b'{"run_id": "small"}', "summary/summary.json: benchmark_version: missing (required) (and "),
    (b"[1, 2]", "summary/summary.json: expected a JSON object"),
])
def test_a_torn_or_foreign_summary_is_said_so_and_the_tally_stands_in(small: SampleRun, body: bytes,
                                                                       reason: str) -> None:
    html = index_with_summary(small, body)
    assert reason in html and "live tally" in html


def test_a_newer_summarize_key_is_shown_as_it_is(small: SampleRun) -> None:
    body = orjson.loads((SUMMARIES / "summary-8cc9995.json").read_bytes()) | {"do_nothing_baseline": 0.125}
    html = index_with_summary(small, orjson.dumps(body))
    assert "More from summary.json" in html and "do_nothing_baseline" in html and "0.125" in html


def test_meta_json_from_before_its_records_were_typed_reads(tmp_path: Path) -> None:
    meta = read_record(DATA / "meta-8cc9995.json", AttemptMeta)
    assert meta.guest is not None and meta.guest.spec is not None and meta.gateway_health is not None
    assert (meta.guest.spec.kind, meta.guest.spec.volume_size_gb) == ("test-desktop", 32)
    health = meta.gateway_health
    assert (health.provider, health.scope_secrets, health.max_requests_per_task) == ("openai", True, 100)
    assert health.token_log is not None and health.token_log.writable and health.task is not None
    old, dumped = orjson.loads((DATA / "meta-8cc9995.json").read_bytes()), meta.model_dump(mode="json")
    assert held_in(old, dumped), "every field it held reads back unchanged"
    assert all(dumped[key] is None for key in dumped.keys() - old.keys()), "fields added since read as unknown"


def held_in(old: object, new: object) -> bool:
    """Every field of `old` is in `new` with the same value (`new` may hold fields added since)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return all(key in new and held_in(value, new[key]) for key, value in old.items())
    if isinstance(old, list) and isinstance(new, list):
        return len(old) == len(new) and all(held_in(a, b) for a, b in zip(old, new, strict=True))
    return old == new


def test_the_guest_spec_record_never_holds_the_password() -> None:
    body = orjson.loads((DATA / "meta-8cc9995.json").read_bytes())
    body["guest"]["spec"]["client_password"] = "hunter2"
    meta = AttemptMeta.model_validate(body)
    assert "hunter2" not in meta.model_dump_json()


def test_an_old_meta_json_shows_on_its_attempt_page(small: SampleRun) -> None:
    shutil.copy(DATA / "meta-8cc9995.json", small.run_dir / "tasks" / "t-1" / "meta.json")
    html = Site(RunData(small.run_dir)).attempt("this", "tasks", "t-1", LINKS)
    assert html is not None and "gateway_health" in html and "scope_key_id" in html and "google-chrome" in html


def test_a_config_key_of_another_hcu_is_shown_as_it_is(small: SampleRun) -> None:
    path = small.run_dir / "config.json"
    write_json(path, orjson.loads(path.read_bytes()) | {"guest_snapshot": "warm"})
    run = RunData(small.run_dir)
    assert run.config is not None and run.config_file.unknown == {"guest_snapshot": "warm"}
    html = Site(run).index(LINKS)
    assert "guest_snapshot" in html and "t-2" in html and "does not read" not in html


def test_a_config_that_does_not_read_is_said_so_and_the_folders_stand_in(small: SampleRun) -> None:
    path = small.run_dir / "config.json"
    write_json(path, orjson.loads(path.read_bytes()) | {"repeats": 0})
    run = RunData(small.run_dir)
    assert run.config is None and run.config_file.problem == "config.json: repeats: Input should be greater than " \
                                                              "or equal to 1 (got 0)"
    html = Site(run).index(LINKS)
    assert "config.json: repeats: Input should be greater than or equal to 1" in html
    assert [row.key for row in run.index().rows] == ["t-1", "t-2"], "the attempt folders, as without a config"


def test_a_manifest_and_a_lease_that_do_not_read_say_why(small: SampleRun) -> None:
    write_json(small.run_dir / "manifest.json", {"run_id": "small"})
    write_json(small.run_dir / "tasks" / "t-1" / "attempt.json", {"pid": "not a number"})
    run = RunData(small.run_dir)
    assert run.manifest() is None and "manifest.json: config_sha256: missing (required)" in Site(run).index(LINKS)
    page = Site(run).attempt("this", "tasks", "t-1", LINKS)
    assert page is not None and "tasks/t-1/attempt.json: " in page


def test_repeats_holding_the_same_scores_in_another_order_agree(tmp_path: Path) -> None:
    """(0.1 + 0.2) + 0.3 != (0.3 + 0.2) + 0.1 in floats: the viewer compares task means exactly, as summarize."""
    runs = []
    for name, scores in (("a", (0.1, 0.2, 0.3)), ("b", (0.3, 0.2, 0.1))):
        sample = build_run(tmp_path / name, name, [Attempt("x", "partial", repeat=r) for r in (1, 2, 3)])
        for repeat, score in enumerate(scores, start=1):
            path = sample.run_dir / "tasks" / ("x" if repeat == 1 else f"x.r{repeat}") / "result.json"
            write_json(path, orjson.loads(path.read_bytes()) | {"score": score, "evaluator_score": score})
        runs.append(RunData(sample.run_dir).index())
    comparison = compare_runs(*runs)
    assert [pair.verdict for pair in comparison.pairs] == ["agree"] and comparison.discordant == 0


def test_a_result_scored_outside_0_to_1_is_unreadable_in_the_viewer(small: SampleRun) -> None:
    path = small.run_dir / "tasks" / "t-2" / "result.json"
    write_json(path, orjson.loads(path.read_bytes()) | {"score": 1.5})
    row = next(row for row in RunData(small.run_dir).index().rows if row.key == "t-2")
    assert (row.status, row.score, row.withheld_reason) == ("unreadable", None,
                                                            "unreadable: score 1.5: expected a number from 0 to 1")
