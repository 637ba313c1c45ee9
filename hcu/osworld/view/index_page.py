"""The run page: headline figures, domains, how attempts ended, withheld tasks, repeats, the manifest, and the
table of every attempt (filter by domain, status, failure class, score, repeat and timing; sort by any column).
Filtering and sorting run in the page (viewer.js) over rows the server renders once."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hcu.osworld.records.manifest import FileIdentity, Manifest
from hcu.osworld.summary.model import RunSummary
from hcu.osworld.summary.parts import TaskRepeats
from hcu.osworld.view.charts import run_charts
from hcu.osworld.view.data import AttemptRow, RunData, RunIndex, SummaryFile
from hcu.osworld.view.figures import other_fields, repeat_figures, summary_cards, tally_cards
from hcu.osworld.view.html import (
    absent,
    badge,
    count,
    details,
    esc,
    json_block,
    kv,
    page,
    pct,
    score_badge,
    score_band,
    seconds,
    section,
    usd,
    when,
)
from hcu.osworld.view.links import Links
from hcu.osworld.view.queue_live import live_section, timeline_section
from hcu.osworld.view.records import RecordFile
from hcu.osworld.view.tables import Column, Row, data_table, filter_form, number, select, text

COLUMNS: tuple[Column, ...] = (("task", "task", "text"), ("rep", "repeat", "num"), ("domain", "domain", "text"),
           ("status", "status", "text"), ("score", "score", "num"), ("eval", "evalscore", "num"),
           ("ended", "termination", "text"), ("failure class", "class", "text"),
           ("duration", "duration", "num"), ("calls", "calls", "num"), ("tokens", "tokens", "num"),
           ("rl wait", "wait", "num"), ("cost", "cost", "num"), ("retries", "retries", "num"), ("note", "", ""))
"""(header, data attribute it sorts on, sort kind): one per table column."""


def _num(value: float | int | None) -> str:
    return "" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def class_of(row: AttemptRow) -> str:
    """The failure class a filter matches: "clean" for a completed attempt without one."""
    return row.failure_class or ("clean" if row.status == "completed" else "")


def _note(row: AttemptRow) -> str:
    if row.status == "no result":
        return f"last phase: {row.phase}" if row.phase else "no result.json yet"
    if row.getters_read_nothing:
        return f"getter read nothing: {row.getters_read_nothing}"
    return row.failure_message or row.withheld_reason


def task_row(row: AttemptRow, links: Links) -> Row:
    data = {"task": row.task_id, "repeat": row.repeat, "domain": row.domain, "status": row.status,
            "class": class_of(row), "band": score_band(row.score, row.status), "score": _num(row.score),
            "evalscore": _num(row.evaluator_score), "termination": row.termination, "duration": _num(row.duration_sec),
            "calls": _num(row.model_calls), "tokens": _num(row.tokens), "wait": _num(row.rate_limit_wait_sec),
            "cost": _num(row.cost_usd), "retries": row.retries}
    task = (f'<a href="{esc(links.attempt("this", "tasks", row.key))}" title="{esc(row.key)}">{esc(row.task_id)}</a>'
            if row.status != "not started" else esc(row.task_id))
    note = _note(row)
    cells = [f'<td class="id">{task}</td>', f"<td>{row.repeat}</td>", f"<td>{esc(row.domain)}</td>",
             f"<td>{badge(row.status)}</td>", f"<td>{score_badge(row.score, row.status)}</td>",
             f'<td class="n">{esc(_num(row.evaluator_score))}</td>', f"<td>{esc(row.termination)}</td>",
             f"<td>{badge(row.failure_class, 'class') if row.failure_class else ''}</td>",
             f'<td class="n">{seconds(row.duration_sec)}</td>', f'<td class="n">{count(row.model_calls)}</td>',
             f'<td class="n">{count(row.tokens)}</td>',
             f'<td class="n">{seconds(row.rate_limit_wait_sec) if row.rate_limit_wait_sec else ""}</td>',
             f'<td class="n">{usd(row.cost_usd) if row.cost_usd is not None else ""}</td>',
             f'<td class="n">{row.retries or ""}</td>', f'<td class="note" title="{esc(note)}">{esc(note)}</td>']
    return data, "".join(cells)


def filters(rows: list[AttemptRow], table_id: str) -> str:
    controls = [text("task", "task", "id contains"), select("domain", "domain", Counter(row.domain for row in rows)),
                select("status", "status", Counter(row.status for row in rows)),
                select("class", "failure class", Counter(class_of(row) for row in rows)),
                select("band", "score", Counter(score_band(row.score, row.status) for row in rows))]
    if len({row.repeat for row in rows}) > 1:
        controls.append(select("repeat", "repeat", Counter(str(row.repeat) for row in rows)))
    controls += [number("dmin", "min", "duration ≥ s", "duration"), number("dmax", "max", "≤ s", "duration"),
                 number("cmin", "min", "calls ≥", "calls"), number("tmin", "min", "tokens ≥", "tokens")]
    return filter_form(table_id, controls)


def task_table(rows: list[AttemptRow], links: Links, table_id: str = "tasks") -> str:
    return filters(rows, table_id) + data_table(table_id, COLUMNS, [task_row(row, links) for row in rows])


def _group_table(title: str, groups: dict[str, Any]) -> str:
    if not groups:
        return ""
    rows = "".join(
        f'<tr><td>{esc(name)}</td><td class="n">{g.tasks}</td><td class="n">{g.valid}</td>'
        f'<td class="n">{g.withheld}</td><td class="n">{pct(g.score)}</td>'
        f'<td class="bar-cell"><span class="bar" style="width:{100 * g.lower_bound:.1f}%"></span>'
        f'<span class="bar-text">{pct(g.lower_bound)}</span></td>'
        f'<td class="n">{g.binary_successes}</td></tr>'
        for name, g in groups.items())
    return (f'<div><h3>By {esc(title)}</h3><table class="grid"><thead><tr><th>{esc(title)}</th><th>tasks</th>'
            f"<th>valid</th><th>withheld</th><th>score</th><th>lower bound</th><th>binary</th></tr></thead>"
            f"<tbody>{rows}</tbody></table></div>")


def _classes(classes: dict[str, Any]) -> str:
    if not classes:
        return ""
    flag = {True: "yes", False: "no", None: "n/a"}
    rows = "".join(f'<tr><td>{badge(name, "class")}</td><td class="n">{c.attempts}</td>'
                   f'<td>{flag[c.retried]}</td><td>{flag[c.scored]}</td></tr>' for name, c in classes.items())
    return (f'<div><h3>Attempts by how they ended</h3><table class="grid"><thead><tr><th>class</th>'
            f"<th>attempts</th><th>retried</th><th>scored</th></tr></thead><tbody>{rows}</tbody></table></div>")


def _task_list(title: str, items: list[tuple[str, str]], links: Links) -> str:
    if not items:
        return ""
    entries = "".join(f'<li><a href="{esc(links.attempt("this", "tasks", key))}">{esc(key)}</a>: {esc(why)}</li>'
                      for key, why in items)
    return details(f"{esc(title)} ({len(items)})", f'<ul class="tasks">{entries}</ul>', cls="list")


def _per_task(rows: list[TaskRepeats]) -> str:
    keys = ("task_id", "domain", "repeats_scored", "mean", "successes", "pass_at_k", "pass_hat_k")
    columns = [(key, key, "text" if key in ("task_id", "domain") else "num") for key in keys]
    return data_table("per-task", columns, [({k: getattr(r, k) for k in keys},
                                             "".join(f"<td>{esc(getattr(r, k))}</td>" for k in keys)) for r in rows])


def _summary_sections(run: RunData, index: RunIndex, file: SummaryFile, links: Links) -> str:
    s: RunSummary = file.summary  # type: ignore[assignment]
    parts = [summary_cards(s)]
    newest, written = index.newest_result_mtime, run.summary_mtime()
    if newest is not None and written is not None and newest > written:
        parts.insert(0, f'<p class="warn">summary/summary.json ({when(written)}) is older than the newest '
                        f"result ({when(newest)}): run summarize again for current figures.</p>")
    repeats = ""
    if figures := repeat_figures(s):
        per_task = s.per_task
        facts = kv([("k", esc(s.repeats)), ("policy", esc(s.repeat_policy)), *figures])
        repeats = (f"<div><h3>Repeats</h3>{facts}"
                   + (details(f"Per task over repeats ({len(per_task)})", _per_task(per_task), cls="list")
                      if per_task else "") + "</div>")
    parts.append(f'<div class="cols">{_group_table("domain", s.by_domain)}'
                 f'{_classes(s.attempts_by_class)}{repeats}{_group_table("stratum", s.by_stratum)}</div>')
    parts.append(_task_list("Withheld", [(t.task_id, t.reason) for t in s.withheld_tasks], links))
    parts.append(_task_list("Scored although a getter read nothing",
                            [(t.task_id, t.getters) for t in s.read_nothing_tasks], links))
    if s.baseline is not None:
        parts.append(_task_list("Pass untouched (the do-nothing baseline: they say nothing about the agent)",
                                [(t.task_id, f"untouched score {t.score:g}") for t in s.baseline.passes_untouched],
                                links))
        parts.append(_task_list("Untouched score unknown (never assumed 0)",
                                [(t.task_id, t.why) for t in s.baseline.unknown], links))
    if more := other_fields(s, file.unknown):
        parts.append(details("More from summary.json", more))
    return "".join(parts)


def _headline(run: RunData, index: RunIndex, links: Links) -> str:
    file = run.summary_file()
    if file.summary is not None:
        return _summary_sections(run, index, file, links)
    why = (f'<p class="warn">{esc(file.problem)}: the figures below are a live tally of the result files (run '
           f"<code>python -m hcu.osworld.summarize {esc(run.run_dir)}</code> again).</p>" if file.problem else
           absent("No summary/summary.json: the figures below are a live tally of the result files (run "
                  f"`python -m hcu.osworld.summarize {run.run_dir}` for intervals and bounds)."))
    return why + tally_cards(index.rows)


def _manifest_facts(manifest: Manifest) -> str:
    """What the run's number depends on, at a glance (manifest.json in full below it)."""
    last = manifest.starts[-1] if manifest.starts else None
    code, guest = manifest.osworld_revision.code, manifest.guest_image
    image = guest.path if isinstance(guest, FileIdentity) else guest.container_image
    facts = [("starts", f"{len(manifest.starts)} (last {when(last.at if last else None)} on "
                        f"{esc(last.host if last else '?')})"),
             ("hcu commit", f"<code>{esc(((last.hcu_commit.commit if last else None) or '?')[:12])}</code>"),
             ("OSWorld", esc(code.desktop_env_version or code.commit or code.error or "?")),
             ("guest image", f"<code>{esc(image or '?')}</code>"),
             ("config sha256", f"<code>{esc(manifest.config_sha256[:16])}</code>"),
             ("task files pinned", count(len(manifest.task_files))),
             ("nodes", count(len(manifest.nodes)))]
    return kv(facts, "facts")


def _record(name: str, file: RecordFile[Any], missing: str) -> str:
    """A run record in full as its file holds it, or why not."""
    shown = file.shown()
    return details(name, json_block(shown) if shown is not None else absent(file.problem or missing))


def _records(run: RunData) -> str:
    manifest, status = run.manifest_file(), run.queue_status()
    facts = _manifest_facts(manifest.record) if manifest.record else ""
    parts = [facts, _record("manifest.json", manifest, "no manifest.json in this run directory"),
             _record("config.json", run.config_file, "no config.json in this run directory"),
             details("QUEUE_STATUS.md", f'<pre class="log">{esc(status)}</pre>' if status else
                     absent("no QUEUE_STATUS.md (the queue writes it while it runs)"))]
    return section("Records", "".join(parts))


def _title_line(run: RunData, index: RunIndex) -> str:
    c = run.config
    bits = [f"agent <b>{esc(c.agent if c else '?')}</b>", f"model <b>{esc(c.model if c else '?')}</b> "
            f"({esc(c.effort if c else '?')})", f"OSWorld {esc(c.benchmark_version if c else '?')}",
            f"{len({row.task_id for row in index.rows})} tasks", f"{len(index.rows)} attempts in tasks/",
            f"{sum(len(v) for v in index.retries.values())} retried attempts"]
    banner = ('<p class="scripted">SCRIPTED MODEL: a scripted upstream stood in for the model; this run checks '
              "the harness, not a model.</p>" if c and c.scripted_model else "")
    return f'<h1>{esc(run.run_id)}</h1><p class="sub">{" · ".join(bits)}</p>{banner}'


def render_index(run: RunData, links: Links, *, compare_with: str | None = None) -> str:
    index = run.index()
    compare = (f'<p class="compare-link"><a href="{esc(links.compare())}">Compare with {esc(compare_with)} →</a></p>'
               if compare_with else "")
    extra = (absent(f"{len(index.extra_folders)} folders in tasks/ name no task of config.json: "
                    + ", ".join(index.extra_folders[:10])) if index.extra_folders and run.config else "")
    body = (_title_line(run, index) + compare + live_section(run, links) + _headline(run, index, links) + extra
            + section("Charts", run_charts(run, index), anchor="charts",
                      note="hover a mark for its figures")
            + section("Attempts", task_table(index.rows, links), anchor="attempts",
                      note="click a header to sort; filters stay in the address") + timeline_section(run)
            + _records(run))
    return page(f"{run.run_id} · hcu view", body, links, [(run.run_id, None)])
