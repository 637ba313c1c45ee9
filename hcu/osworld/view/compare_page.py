"""The compare pages: both runs' headlines side by side and every task with its score in each (disagreeing
tasks first); and one task's steps in both runs, step beside step."""

from __future__ import annotations

from collections import Counter
from itertools import zip_longest

from hcu.osworld.view.attempt_data import AttemptDetail
from hcu.osworld.view.charts import compare_charts
from hcu.osworld.view.compare import Comparison, TaskPair
from hcu.osworld.view.data import AttemptRow, RunData, RunIndex
from hcu.osworld.view.html import (
    absent,
    badge,
    card,
    count,
    esc,
    page,
    pct,
    score_band,
    score_text,
    seconds,
    section,
)
from hcu.osworld.view.index_page import class_of
from hcu.osworld.view.links import Links, Side
from hcu.osworld.view.steps import render_steps, step_card
from hcu.osworld.view.tables import Row, data_table, filter_form, select, text
from hcu.osworld.view.task_page import outcome


def _run_card(run: RunData, index: RunIndex) -> str:
    s = run.summary()
    scores = [row.score for row in index.rows if row.score is not None]
    n = len(index.rows) or 1
    lower = s.lower_bound if s else sum(scores) / n
    withheld = s.withheld if s else n - len(scores)
    score = pct(lower) if not withheld else f"withheld <span class=dim>(≥ {pct(lower)})</span>"
    coverage = pct(s.coverage if s else len(scores) / n)
    c = run.config
    agent, model, effort = (c.agent, c.model, c.effort) if c else (None, None, None)
    return (f'<div class="run-card"><h3>{esc(run.run_id)}</h3><p class="dim">{esc(agent)} · '
            f'{esc(model)} ({esc(effort)})</p><div class="cards">{card("Score", score)}'
            f'{card("Coverage", coverage)}{card("Attempts", count(len(index.rows)))}</div></div>')


def _mean_cell(rows: list[AttemptRow], mean: float | None) -> str:
    if not rows:
        return '<td class="n dim">absent</td>'
    graded = sum(1 for row in rows if row.score is not None)
    status = rows[0].status if len(rows) == 1 else f"{graded}/{len(rows)} graded"
    shown = score_text(mean) if mean is not None else status
    return f'<td class="n">{badge(shown, score_band(mean, rows[0].status if mean is None else "completed"))}</td>'


def _side_cells(rows: list[AttemptRow]) -> str:
    if not rows:
        return "<td></td><td></td>"
    first = rows[0]
    return (f'<td>{badge(class_of(first), "class") if class_of(first) else badge(first.status)}</td>'
            f'<td class="n">{seconds(first.duration_sec)} · {count(first.model_calls)}</td>')


def _pair_row(pair: TaskPair, links: Links) -> Row:
    diff = pair.difference
    data = {"task": pair.task_id, "domain": pair.domain, "verdict": pair.verdict,
            "diff": "" if diff is None else f"{diff:g}", "absdiff": "" if diff is None else f"{abs(diff):g}"}
    started = any(row.status != "not started" for row in pair.this + pair.other)
    link = f'<a href="{esc(links.compare_task(pair.key))}">{esc(pair.task_id)}</a>' if started else esc(pair.task_id)
    return data, (f'<td class="id">{link}</td><td>{esc(pair.domain)}</td>'
                  f'<td>{badge(pair.verdict, "v-" + pair.verdict.replace(" ", "-"))}</td>'
                  f'{_mean_cell(pair.this, pair.this_mean)}{_mean_cell(pair.other, pair.other_mean)}'
                  f'<td class="n">{"" if diff is None else f"{diff:+.2f}"}</td>'
                  f"{_side_cells(pair.this)}{_side_cells(pair.other)}")


def _pairs_table(this: RunData, other: RunData, comparison: Comparison, links: Links) -> str:
    controls = [text("task", "task"), select("verdict", "verdict", Counter(p.verdict for p in comparison.pairs)),
                select("domain", "domain", Counter(p.domain for p in comparison.pairs))]
    columns = (("task", "task", "text"), ("domain", "domain", "text"), ("verdict", "verdict", "text"),
               (this.run_id, "", ""), (other.run_id, "", ""), ("diff", "absdiff", "num"), ("here: r1 ended", "", ""),
               ("here: r1 time · calls", "", ""), ("there: r1 ended", "", ""),
               ("there: r1 time · calls", "", ""))
    return filter_form("pairs", controls) + data_table("pairs", columns,
                                                       [_pair_row(pair, links) for pair in comparison.pairs])


def render_compare(this: RunData, other: RunData, this_index: RunIndex, other_index: RunIndex,
                   comparison: Comparison, links: Links) -> str:
    paired = comparison.paired
    ci = (f"{100 * paired.interval.low:+.1f} to {100 * paired.interval.high:+.1f} points"
          if paired.interval else "n/a")
    stats = (f'<p class="sub">{paired.tasks} tasks graded in both · <b>{comparison.discordant} disagree</b> '
             f"({comparison.better(1)} better here, {comparison.better(-1)} better there) · difference (this "
             f"minus other) <b>{100 * paired.mean:+.1f} points</b>, 95% {ci} (paired normal)</p>")
    table = _pairs_table(this, other, comparison, links)
    body = (f"<h1>{esc(this.run_id)} vs {esc(other.run_id)}</h1>{stats}"
            f'<div class="side-by-side">{_run_card(this, this_index)}{_run_card(other, other_index)}</div>'
            + section("Charts", compare_charts(this, other, comparison), anchor="charts")
            + section("Tasks, disagreeing first", table))
    return page(f"compare · {this.run_id} vs {other.run_id}", body, links,
                [(this.run_id, links.index()), ("compare", None)])


def _column(run: RunData, detail: AttemptDetail | None, links: Links, side: Side) -> str:
    if detail is None:
        return f'<div class="col"><h3>{esc(run.run_id)}</h3>{absent("this run has no such attempt")}</div>'
    link = f'<a href="{esc(links.attempt(side, detail.area, detail.name))}">full page</a>'
    return f'<div class="col"><h3>{esc(run.run_id)} · {link}</h3>{outcome(detail)}</div>'


def _aligned_steps(this: AttemptDetail | None, other: AttemptDetail | None, links: Links) -> str:
    if this is None or other is None or this.trajectory is None or other.trajectory is None:
        cells = [render_steps(d, links, side) if d else absent("no attempt")
                 for d, side in ((this, "this"), (other, "other"))]
        return f'<div class="side-by-side steps-2">{"".join(f"<div class=col>{c}</div>" for c in cells)}</div>'
    rows = []
    for left, right in zip_longest(this.trajectory.steps, other.trajectory.steps):
        cells = [step_card(detail, step, links, side) if step is not None else absent("no step")
                 for detail, step, side in ((this, left, "this"), (other, right, "other"))]
        rows.append(f'<div class="pair-row">{"".join(f"<div class=col>{c}</div>" for c in cells)}</div>')
    return f'<div class="steps-2">{"".join(rows)}</div>'


def render_compare_task(this: RunData, other: RunData, key: str, left: AttemptDetail | None,
                        right: AttemptDetail | None, links: Links) -> str:
    task_id = (left or right).row.task_id if (left or right) else key
    body = (f'<h1 class="id">{esc(task_id)}</h1><p class="sub">{esc(key)} in {esc(this.run_id)} and '
            f"{esc(other.run_id)}</p>"
            f'<div class="side-by-side">{_column(this, left, links, "this")}{_column(other, right, links, "other")}'
            f"</div>" + section("Steps side by side", _aligned_steps(left, right, links)))
    return page(f"{task_id} · compare", body, links,
                [(this.run_id, links.index()), ("compare", links.compare()), (key, None)])
