"""summary.json through its model: what summarize writes reads back equal; summary.json files older versions
of summarize wrote still read, every value they hold unchanged; a file that is not a summary is refused in one
line naming the key; a statistic added to the model shows in summary.md without touching the page."""

from __future__ import annotations

import inspect
from pathlib import Path

import orjson
import pytest

from hcu.osworld.summary import model
from hcu.osworld.summary import parts as summary_parts
from hcu.osworld.summary.model import RunSummary, SummaryUnreadable, parse_summary
from hcu.osworld.summary.report import LEFT_TO_JSON, PLACED, render_markdown
from hcu.osworld.summary.run_summary import load_run, summarize
from tests.summary.conftest import make_repeat_run, ok

DATA = Path(__file__).parent / "data"
OLD_SUMMARIES = ("k1-summary.json", "summary-936a9d7.json", "summary-8cc9995.json")
USAGE = {"requests": 4, "model_calls": 3, "input_tokens": 1000, "cached_input_tokens": 200, "output_tokens": 300,
         "reasoning_tokens": 50, "fully_accounted": True}
PRICES = {"gpt-5.5": {"input_usd_per_mtok": 1.25, "cached_input_usd_per_mtok": 0.125, "output_usd_per_mtok": 10}}


def rich_runs(root: Path) -> tuple[Path, Path]:
    """Two runs of the same tasks with everything summary.json can hold: repeats, a withheld repeat, a timeout
    the evaluator passed, a retry, known costs, a getter that read nothing, domains and strata."""
    tasks = [{"id": "t1", "task_domain": "os", "stratum": "easy"}, {"id": "t2", "task_domain": "os"},
             {"id": "t3", "task_domain": "chrome", "stratum": "hard"}]
    a = make_repeat_run(root, "a", {
        "t1": [ok(1.0, cost_usd=0.5, usage=USAGE, duration_sec=60.0), ok(0.0, cost_usd=0.25, duration_sec=40.0)],
        "t2": [ok(0.5, cost_usd=0.1, duration_sec=30.0,
                  getters_read_nothing=[{"getter": "get_vm_file", "reason": "None"}]),
               {"status": "evaluator_error", "failure_classification": "evaluator", "cost_usd": 0.2}],
        "t3": [ok(0.0, termination_reason="timeout", evaluator_score=1.0, cost_usd=1.0), ok(1.0, cost_usd=0.3)]},
        retries={"t1": [{"status": "error", "failure_classification": "guest", "duration_sec": 10.0,
                         "cost_usd": 0.0}]}, tasks=tasks, prices=PRICES)
    b = make_repeat_run(root, "b", {"t1": [ok(0.0), ok(0.0)], "t2": [ok(0.5), ok(0.5)], "t3": [ok(1.0), ok(1.0)]},
                        tasks=tasks)
    return a, b


def test_what_summarize_writes_reads_back_equal(tmp_path: Path) -> None:
    a, b = rich_runs(tmp_path)
    built = load_run(a).summary
    returned = summarize(a)
    written = orjson.loads((a / "summary" / "summary.json").read_bytes())
    read, unknown = parse_summary(written)
    assert unknown == {} and read == built and read.to_json() == written == returned
    assert "compare" not in written, "no --compare: no compare key, as before the model"
    with_compare = summarize(a, b)
    read, _ = parse_summary(orjson.loads((a / "summary" / "summary.json").read_bytes()))
    assert read.compare is not None and read.to_json() == with_compare
    assert read.model_copy(update={"compare": None}) == built


@pytest.mark.parametrize("name", OLD_SUMMARIES)
def test_summary_json_from_older_summarize_reads_unchanged(name: str) -> None:
    before = orjson.loads((DATA / name).read_bytes())
    summary, unknown = parse_summary(before)
    assert unknown == {}
    assert summary.model_dump(mode="json", exclude_unset=True) == before, "every key and value, as it was"
    assert summary.model_fields_set == set(before), "a key the file lacks is told apart from one it has"


def test_the_first_summarize_lacks_what_came_later() -> None:
    summary, _ = parse_summary(orjson.loads((DATA / "summary-936a9d7.json").read_bytes()))
    assert (summary.retried, summary.repeats, summary.cost_usd, summary.per_task) == (None, None, None, [])
    assert summary.compare is not None and summary.compare.sign_settled is None
    assert [(d.task_id, d.repeats) for d in summary.compare.discordant] == [("t1", None), ("t5", None)]


@pytest.mark.parametrize("change, message", [
    ({"schema_version": 2}, "schema_version: 2 is newer than this hcu reads (1)"),
    ({"score": "high"}, "score: Input should be a valid number"),
    ({"ci95": {"method": "guess", "low": 0, "high": 1, "of": "score"}}, "ci95.method: Input should be"),
    ({"per_task": [{"task_id": "x"}]}, "per_task[0].domain: missing (required)"),
    ({"tokens": None}, "tokens: expected a JSON object"),
])
def test_a_file_that_is_not_a_summary_is_refused_in_one_line(change: dict, message: str) -> None:
    body = orjson.loads((DATA / "summary-8cc9995.json").read_bytes()) | change
    with pytest.raises(SummaryUnreadable) as caught:
        parse_summary(body)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_missing_key_of_the_first_summarize_is_refused() -> None:
    body = orjson.loads((DATA / "summary-936a9d7.json").read_bytes())
    del body["tasks"]
    with pytest.raises(SummaryUnreadable, match=r"^tasks: missing \(required\)$"):
        parse_summary(body)
    with pytest.raises(SummaryUnreadable, match="expected a JSON object"):
        parse_summary([body])


def test_keys_of_a_newer_summarize_are_returned_apart() -> None:
    body = orjson.loads((DATA / "summary-8cc9995.json").read_bytes()) | {"do_nothing_baseline": 0.125}
    summary, unknown = parse_summary(body)
    assert unknown == {"do_nothing_baseline": 0.125} and summary.score is None


def test_every_field_has_a_description() -> None:
    parts = [cls for module in (model, summary_parts) for cls in vars(module).values()
             if inspect.isclass(cls) and issubclass(cls, summary_parts.SummaryPart)]
    undescribed = [f"{cls.__name__}.{name}" for cls in parts for name, info in cls.model_fields.items()
                   if not info.description]
    assert len(parts) > 10 and undescribed == []


def test_summary_md_places_or_leaves_only_fields_of_the_model() -> None:
    """A field summary.md neither places nor leaves is listed under "More figures" (the recipe's way in)."""
    assert set(RunSummary.model_fields) >= PLACED | LEFT_TO_JSON, "a renamed field would fall out of the page"


class WithBaseline(RunSummary):
    do_nothing_baseline: float | None = None
    """Score of an agent that does nothing, on the same tasks."""


def test_a_statistic_added_to_the_model_is_listed_in_summary_md(tmp_path: Path) -> None:
    run = load_run(make_repeat_run(tmp_path, "stat", {"x": [ok(1.0)], "y": [ok(0.0)]}))
    summary = WithBaseline(**run.summary.model_dump(), do_nothing_baseline=0.125)
    md = render_markdown(summary, run.tasks, run.cost_note)
    assert "| Score of an agent that does nothing, on the same tasks (`do_nothing_baseline`) | 0.125 |" in md
    assert "do_nothing_baseline" not in render_markdown(run.summary, run.tasks, run.cost_note)
    older = WithBaseline(**run.summary.model_dump())  # a file from before the statistic: the key is not set
    assert "do_nothing_baseline" not in render_markdown(older, run.tasks, run.cost_note), "not computed: not listed"
