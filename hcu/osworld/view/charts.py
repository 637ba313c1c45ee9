"""The charts of the run page and the compare page, from what the pages already read: summary.json through the
summary's model (scores, bounds and intervals), the attempt rows (durations, model calls) and the two runs paired
task by task. Drawn by plots.py; a chart that has nothing to draw says why instead."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from hcu.osworld.summary.model import RunSummary
from hcu.osworld.summary.parts import GroupFigures, Interval, ScoreInterval
from hcu.osworld.view.compare import Comparison
from hcu.osworld.view.data import AttemptRow, RunData, RunIndex
from hcu.osworld.view.html import absent, esc, pct, score_band, usd
from hcu.osworld.view.plots import (
    Category,
    Estimate,
    Placed,
    Ranked,
    Shape,
    clock,
    estimate_rows,
    histogram,
    interval_scatter,
    ranked_points,
)
from hcu.osworld.view.quota_chart import quota_charts
from hcu.osworld.view.svg import Fill, count_step, time_step

OUTCOMES = (Category("pass", Fill("#16803c")), Category("partial", Fill("#a15c00", "dots")),
            Category("fail", Fill("#b42318", "hatch")), Category("withheld", Fill("#5b6270", "hollow")))
"""How an attempt's bar is filled by its score: each outcome in a pattern of its own (not told by colour alone)."""
QUOTA_TITLE = "Quota over the run's time"


def _outcome(row: AttemptRow) -> str:
    band = score_band(row.score, row.status)
    return band if band in ("pass", "partial", "fail") else "withheld"


def boxed(title: str, body: str) -> str:
    return f'<figure class="chart-box"><figcaption>{esc(title)}</figcaption>{body}</figure>'


def _interval_text(ci: Interval | None) -> str:
    return "interval not in this summary (an older summarize)" if ci is None else (
        f"95% {pct(ci.low)} to {pct(ci.high)} ({ci.method})")


def _estimate(label: str, g: GroupFigures, ci: ScoreInterval | None, *, strong: bool = False) -> Estimate:
    of = ci.of if ci is not None else "score"
    score = f"score {pct(g.score)}" if g.score is not None else "score withheld"
    short = (pct(g.score) if g.score is not None else f"≥ {pct(g.lower_bound)}") + (
        f" · {pct(ci.low)}–{pct(ci.high)}" if ci is not None else "")
    detail = (f"{score}; lower bound {pct(g.lower_bound)}; {_interval_text(ci)}"
              f"{' of the lower bound' if of == 'lower_bound' else ''}; {g.tasks} tasks, {g.valid} validly graded "
              f"attempts, {g.withheld} withheld")
    return Estimate(label, g.score, g.lower_bound, ci.low if ci else None, ci.high if ci else None, short, detail,
                    strong)


def domain_chart(s: RunSummary) -> str:
    """The run's score and lower bound, without the tasks passing untouched when there is a baseline, and each
    domain's, with their 95% intervals."""
    rows = [_estimate("all tasks", s, s.ci95, strong=True)]
    baseline = s.baseline
    if baseline is not None and baseline.without_untouched_passes is not None:
        without = baseline.without_untouched_passes
        rows.append(_estimate(f"without {len(baseline.passes_untouched)} passing untouched", without, without.ci95,
                              strong=True))
    rows += [_estimate(name, g, g.ci95) for name, g in s.by_domain.items()]
    description = (f"For all {s.tasks} tasks and each of {len(s.by_domain)} domains: the lower bound (withheld "
                   "repeats count 0) as a bar, the score as a dot (none while a task is withheld) and its 95% "
                   "interval as a line with end caps.")
    return estimate_rows("chart-domains", "Score and lower bound by domain, with 95% intervals", description, rows,
                         x_label="score (mean of task means)", keys=("lower bound", "score", "95% interval"))


def _counts(rows: Sequence[AttemptRow]) -> str:
    counts = Counter(_outcome(row) for row in rows)
    return ", ".join(f"{counts[c.name]} {c.name}" for c in OUTCOMES if counts[c.name])


def duration_chart(rows: Sequence[AttemptRow]) -> str:
    timed = [row for row in rows if row.duration_sec is not None]
    if not timed:
        return absent("No attempt has a duration yet.")
    description = (f"Histogram of {len(timed)} attempt durations, stacked by outcome ({_counts(timed)}); "
                   f"{len(rows) - len(timed)} attempts without a duration are left out.")
    return histogram("chart-durations", "Attempt durations", description,
                     [(row.duration_sec, _outcome(row)) for row in timed], OUTCOMES,  # type: ignore[misc]
                     x_label="attempt duration", unit="attempts", fmt=clock, step_of=time_step)


def calls_chart(rows: Sequence[AttemptRow]) -> str:
    counted = [row for row in rows if row.model_calls is not None]
    if not counted:
        return absent("No attempt has a count of model calls yet.")
    description = (f"Histogram of the model calls of {len(counted)} attempts, stacked by outcome "
                   f"({_counts(counted)}); {len(rows) - len(counted)} attempts without a count are left out.")
    return histogram("chart-calls", "Model calls per attempt", description,
                     [(float(row.model_calls), _outcome(row)) for row in counted], OUTCOMES,  # type: ignore[arg-type]
                     x_label="model calls", unit="attempts", fmt=lambda v: f"{v:g}",
                     step_of=count_step, discrete=True)


def run_charts(run: RunData, index: RunIndex) -> str:
    """The run page's charts section body."""
    summary, rows = run.summary(), index.rows
    domains = (boxed("Score and lower bound by domain", domain_chart(summary)) if summary is not None else
               boxed("Score and lower bound by domain",
                     absent("Needs summary/summary.json (run summarize): its intervals are summarize's.")))
    return (f'<div class="charts">{domains}{boxed("Attempt durations", duration_chart(rows))}'
            f'{boxed("Model calls per attempt", calls_chart(rows))}{boxed(QUOTA_TITLE, quota_charts(run, index))}'
            "</div>")


def paired_chart(this: RunData, other: RunData, comparison: Comparison) -> str:
    both = [pair for pair in comparison.pairs if pair.difference is not None]
    if not both:
        return absent("No task is graded in both runs.")
    points = [Ranked(pair.task_id, pair.difference, pair.verdict == "disagree",  # type: ignore[arg-type]
                     f"{pair.task_id} ({pair.domain or 'no domain'}): {this.run_id} {pair.this_mean:.3g}, "
                     f"{other.run_id} {pair.other_mean:.3g}; difference {pair.difference:+.3g}"
                     + (" (discordant)" if pair.verdict == "disagree" else "")) for pair in both]
    paired = comparison.paired
    ci = paired.interval
    reference = (paired.mean, ci.low if ci else None, ci.high if ci else None,
                 f"mean difference {paired.mean:+.3f}" + (f", 95% {ci.low:+.3f} to {ci.high:+.3f} ({ci.method})"
                                                          if ci else ", no interval below two pairs"))
    description = (f"Each of {len(both)} tasks graded in both runs, ranked by its difference ({this.run_id} minus "
                   f"{other.run_id}, task means): {comparison.discordant} discordant tasks as filled diamonds, the "
                   "tasks both runs score alike as small circles on 0; the mean difference as a dashed line with "
                   "its 95% interval as a band.")
    return ranked_points("chart-paired", "Per-task paired differences", description, points,
                         y_label=f"{this.run_id} minus {other.run_id}", x_label=f"{len(both)} tasks, by difference",
                         keys=("discordant task", "same score in both"), reference=reference)


def _placed(run: RunData, shape: Shape) -> tuple[Placed | None, str]:
    """The run's point (score against cost per valid result), or why it has none."""
    s = run.summary()
    if s is None:
        return None, f"{run.run_id}: no summary.json"
    if s.cost_per_valid_result_usd is None:
        return None, f"{run.run_id}: cost per valid result unknown"
    value, of = (s.score, "score") if s.score is not None else (s.lower_bound, "lower bound (tasks withheld)")
    detail = (f"{of} {pct(value)}, 95% {pct(s.ci95.low)} to {pct(s.ci95.high)} ({s.ci95.method}); "
              f"{usd(s.cost_per_valid_result_usd)} per valid result ({s.valid} valid, coverage {pct(s.coverage)})")
    return Placed(run.run_id, s.cost_per_valid_result_usd, value, s.ci95.low, s.ci95.high, shape, detail), ""


def cost_chart(this: RunData, other: RunData) -> str:
    placed = [_placed(this, "circle"), _placed(other, "square")]
    points = [point for point, _ in placed if point is not None]
    missing = "; ".join(why for _, why in placed if why)
    if not points:
        return absent(f"Neither run can be placed: {missing}.")
    description = (f"Each run's score (its lower bound while tasks are withheld) with its 95% interval against its "
                   f"cost per valid result: {this.run_id} a circle, {other.run_id} a square."
                   + (f" Not drawn: {missing}." if missing else ""))
    chart = interval_scatter("chart-cost", "Score against cost per valid result", description, points,
                             x_label="cost per valid result (USD)", y_label="score",
                             x_fmt=lambda v: f"${v:,.2f}" if v >= 1 or v == 0 else f"${v:.3g}")
    return chart + (absent(f"Not drawn: {missing}.") if missing else "")


def compare_charts(this: RunData, other: RunData, comparison: Comparison) -> str:
    """The compare page's charts section body."""
    return (f'<div class="charts">{boxed("Per-task paired differences", paired_chart(this, other, comparison))}'
            f'{boxed("Score against cost per valid result", cost_chart(this, other))}</div>')
