"""The page of one attempt: its outcome, the instruction, the evaluator's result (getters that read nothing
included, the final screens), phases with durations, every step, the recording, setup steps, logs, the
attempts retried before it, and its raw records and files."""

from __future__ import annotations

from typing import Any

from hcu.osworld.attempt.meta import AttemptMeta
from hcu.osworld.records.layout import LEASE_FILE, RESULT_FILE, RETRY_FILE
from hcu.osworld.view.attempt_data import AttemptDetail
from hcu.osworld.view.data import RunData, repeat_key
from hcu.osworld.view.html import (
    MISSING,
    absent,
    badge,
    count,
    details,
    esc,
    json_block,
    kv,
    page,
    score_badge,
    seconds,
    section,
    usd,
    when,
)
from hcu.osworld.view.links import Links, Side
from hcu.osworld.view.records import RecordFile
from hcu.osworld.view.steps import render_steps


def _or_missing(value: object) -> object:
    return MISSING if value is None else value


def _usage(result: dict[str, Any]) -> list[tuple[str, str]]:
    usage = result.get("usage") or {}
    if not usage:
        return [("usage", "not recorded (no token log)")]
    accounted = "" if usage.get("fully_accounted") else ' <span class="warn-text">(not fully accounted)</span>'
    return [("model calls", f"{count(usage.get('model_calls'))} of {count(usage.get('requests'))} requests"),
            ("tokens", f"in {count(usage.get('input_tokens'))} (cached {count(usage.get('cached_input_tokens'))})"
                       f" · out {count(usage.get('output_tokens'))} (reasoning "
                       f"{count(usage.get('reasoning_tokens'))}){accounted}"),
            ("rate-limit wait", seconds(usage.get("rate_limit_wait_sec")))]


def outcome(detail: AttemptDetail) -> str:
    r, row = detail.result or {}, detail.row
    ended = esc(r.get("termination_reason") or MISSING)
    if r.get("termination_detail"):
        ended += f" ({esc(r['termination_detail'])})"
    pairs = [("status", badge(row.status)), ("score", score_badge(row.score, row.status)),
             ("evaluator score", esc(_or_missing(r.get("evaluator_score")))), ("ended", ended),
             ("failure class", badge(row.failure_class, "class") if row.failure_class else "none"),
             ("protocol word", esc(r.get("protocol_word") or MISSING)),
             ("duration", seconds(row.duration_sec)), *_usage(r),
             ("cost", usd(row.cost_usd)), ("rate-limit resumes", esc(r.get("rate_limit_resumes", 0))),
             ("agent", f"{esc(r.get('agent'))} · {esc(r.get('model'))} ({esc(r.get('effort'))})"),
             ("attempt id", f"<code>{esc(r.get('attempt_id'))}</code>"),
             ("started", when(r.get("started_at"))), ("finished", when(r.get("finished_at")))]
    if detail.result is None:
        pairs = [("status", badge(row.status)), ("last phase", esc(row.phase or MISSING))]
    message = r.get("failure_message")
    return kv(pairs, "facts") + (f'<pre class="failure">{esc(message)}</pre>' if message else "")


def phases(result: dict[str, Any] | None) -> str:
    timings = (result or {}).get("phases") or []
    if not timings:
        return absent("no phases recorded (no result.json yet, or an old one)")
    total = sum(p.get("duration_sec") or 0 for p in timings) or 1
    start = min(p.get("started_at") or 0 for p in timings)
    bar = "".join(f'<span class="ph ph-{esc(p.get("status"))}" style="flex:{max(p.get("duration_sec") or 0, 0.0001)}"'
                  f' title="{esc(p.get("name"))}: {seconds(p.get("duration_sec"))}">{esc(p.get("name"))}</span>'
                  for p in timings)
    rows = "".join(f'<tr><td>{esc(p.get("name"))}</td><td>{badge(str(p.get("status")), "ph-" + str(p.get("status")))}'
                   f'</td><td class="n">+{seconds((p.get("started_at") or start) - start)}</td>'
                   f'<td class="n">{seconds(p.get("duration_sec"))}</td>'
                   f'<td class="n">{100 * (p.get("duration_sec") or 0) / total:.0f}%</td>'
                   f'<td class="note">{esc(p.get("error") or "")}</td></tr>' for p in timings)
    return (f'<div class="phasebar">{bar}</div><table class="grid"><thead><tr><th>phase</th><th>status</th>'
            f"<th>at</th><th>duration</th><th>share</th><th>error</th></tr></thead><tbody>{rows}</tbody></table>")


def evaluation(detail: AttemptDetail, links: Links, side: Side) -> str:
    r = detail.result or {}
    empty = r.get("getters_read_nothing") or []
    parts = [kv([("evaluator score", esc(_or_missing(r.get("evaluator_score")))),
                 ("score that counts", score_badge(detail.row.score, detail.row.status)),
                 ("settle before evaluation", seconds(r.get("settle_seconds"))),
                 ("stand-in task files", "yes" if r.get("stand_ins") else "no")])]
    if r.get("termination_reason") in ("timeout", "max_model_calls") and (r.get("evaluator_score") or 0) > 0:
        parts.append(f'<p class="warn">Scored 0: the attempt ended on {esc(r["termination_reason"])}, although the '
                     f"evaluator gave {esc(r['evaluator_score'])}.</p>")
    if empty:
        items = "".join(f"<li><code>{esc(g.get('getter'))}</code>: {esc(g.get('reason'))}</li>" for g in empty)
        parts.append(f'<div class="warn">Getters that read nothing (the score stands, check it): <ul>{items}</ul>'
                     "</div>")
    elif detail.row.status == "completed":
        parts.append('<p class="dim">Every getter read something of the guest\'s state.</p>')
    shots = "".join(f'<figure class="shot final"><img src="{esc(links.file(side, path))}" loading="lazy" '
                    f'alt="{esc(label)}"><figcaption>{esc(label)}</figcaption></figure>'
                    for label, path in detail.final_screenshots)
    parts.append(f'<div class="finals">{shots}</div>' if shots else absent("no final screenshots"))
    return "".join(parts)


def setup_steps(meta: AttemptMeta | None) -> str:
    steps = meta.setup_steps if meta else []
    if not steps:
        return absent("no setup steps in meta.json")
    rows = "".join(
        f'<tr><td class="n">{esc(s.index)}</td><td><code>{esc(s.type)}</code></td>'
        f'<td>{badge("ok" if s.ok else "failed", "pass" if s.ok else "fail")}</td>'
        f'<td class="n">{seconds(s.duration_sec)}</td>'
        f'<td>{details(esc(str(s.parameters)[:120]), json_block(s.parameters))}</td>'
        f'<td class="n">{len(s.guest_answers)}</td><td class="note">{esc(s.error or "")}</td></tr>' for s in steps)
    return (f'<table class="grid"><thead><tr><th>#</th><th>type</th><th>ok</th><th>duration</th><th>parameters</th>'
            f"<th>guest answers</th><th>error</th></tr></thead><tbody>{rows}</tbody></table>")


def final_desktop(detail: AttemptDetail, run_dir: str) -> str:
    """Whether the final desktop was kept (meta.json), and the commands that open or regrade it."""
    record = detail.meta.record.final_desktop if detail.meta.record else None
    if record is None:
        return absent("meta.json says nothing of a final desktop (an attempt from before hcu kept them, or one "
                      "that never reached its agent)")
    if not record.kept:
        return f"<p>Not kept: {esc(record.reason or 'no reason recorded')}</p>"
    repeat = f" --repeat {detail.row.repeat}" if detail.row.repeat > 1 else ""
    lacks = f" (not {esc(', '.join(record.lacks))})" if record.lacks else ""
    return (f"<p>Kept in <code>{esc(detail.folder)}/final-desktop/</code>: {count(record.bytes)} bytes, the guest "
            f"held {seconds(record.save_sec)} to save it; it holds {esc(', '.join(record.holds))}{lacks}, as the "
            f"evaluator found it.</p><p>Open it: <code>python -m hcu.osworld.open_desktop {esc(run_dir)} "
            f"{esc(detail.row.task_id)}{repeat}</code><br>Score it again: <code>python -m hcu.osworld.regrade "
            f"{esc(run_dir)} --tasks {esc(detail.row.task_id)}</code></p>")


SHOWN_META = frozenset({"setup_steps", "final_desktop"})
"""meta.json parts with sections of their own (the evaluation's outcome is result.json's: see `evaluation`)."""


def run_time(meta: RecordFile[AttemptMeta]) -> str:
    """meta.json as its file holds it, whatever its version: its plain values as a grid, each nested record
    foldable."""
    shown = meta.shown()
    if shown is None:
        return absent(meta.problem or "no meta.json")
    plain = [(key, f"<code>{esc(value)}</code>") for key, value in shown.items()
             if not isinstance(value, (dict, list)) and key not in SHOWN_META]
    nested = "".join(details(esc(key), json_block(value)) for key, value in shown.items()
                     if isinstance(value, (dict, list)) and key not in SHOWN_META)
    return kv(plain, "facts") + nested


def logs(detail: AttemptDetail, links: Links, side: Side) -> str:
    if not detail.logs:
        return absent("no logs for this attempt")
    opened = detail.row.status != "completed"
    return "".join(details(
        f'{esc(tail.label)} <a href="{esc(links.file(side, tail.path))}">{esc(tail.path)}</a> '
        f'<span class="dim">{count(tail.size)} bytes{", last 64 KiB shown" if tail.truncated else ""}</span>',
        f'<pre class="log">{esc(tail.text)}</pre>', opened=opened and index == 0)
        for index, tail in enumerate(detail.logs))


def retried(detail: AttemptDetail, links: Links, side: Side) -> str:
    if not detail.retried:
        return ""
    rows = "".join(
        f'<tr><td class="id"><a href="{esc(links.attempt(side, "retries", row.key))}">{esc(row.key)}</a></td>'
        f'<td>{badge((note.failure_classification if note else None) or row.failure_class or "?", "class")}</td>'
        f'<td class="n">{seconds(row.duration_sec)}</td><td class="n">{count(row.model_calls)}</td>'
        f'<td>{when(note.moved_at if note else None)}</td><td class="note">{esc(note.reason if note else "")}</td></tr>'
        for row, note in detail.retried)
    return section(f"Retried attempts ({len(detail.retried)})",
                   f'<table class="grid"><thead><tr><th>attempt</th><th>class</th><th>duration</th><th>calls</th>'
                   f"<th>set aside</th><th>reason</th></tr></thead><tbody>{rows}</tbody></table>")


def records(detail: AttemptDetail) -> str:
    named = [(RESULT_FILE, detail.result), (LEASE_FILE, detail.lease.shown()), (RETRY_FILE, detail.retry_note.shown())]
    problems = [file.problem for file in (detail.lease, detail.retry_note) if file.problem]
    return "".join(details(esc(name), json_block(value)) for name, value in named if value is not None) + "".join(
        absent(problem) for problem in problems)


def files(detail: AttemptDetail, links: Links, side: Side) -> str:
    items = "".join(
        f"<li>{esc(e.path.rsplit('/', 1)[-1])}/ <span class='dim'>{e.files_inside} files</span></li>"
        if e.files_inside is not None else
        f'<li><a href="{esc(links.file(side, e.path))}">{esc(e.path.rsplit("/", 1)[-1])}</a> '
        f'<span class="dim">{count(e.size)} B</span></li>' for e in detail.files)
    return f'<ul class="files">{items}</ul>' if items else absent("no files")


def _siblings(run: RunData, detail: AttemptDetail, links: Links, side: Side, compare: bool) -> str:
    row, bits = detail.row, []
    k = run.repeats()
    if detail.area == "tasks" and k > 1:
        for n in range(1, k + 1):
            key = repeat_key(row.task_id, n)
            if key == detail.name:
                bits.append(f"<b>r{n}</b>")
            elif (run.run_dir / "tasks" / key).is_dir():
                bits.append(f'<a href="{esc(links.attempt(side, "tasks", key))}">r{n}</a>')
            else:
                bits.append(f'<span class="dim">r{n} not started</span>')
    if compare and detail.area == "tasks":
        bits.append(f'<a href="{esc(links.compare_task(detail.name))}">compare with the other run →</a>')
    return f'<p class="siblings">{" · ".join(bits)}</p>' if bits else ""


def render_task(run: RunData, detail: AttemptDetail, links: Links, *, side: Side = "this",
                compare: bool = False) -> str:
    row = detail.row
    title = f"{row.task_id}" + (f" · repeat {row.repeat}" if row.repeat > 1 else "")
    if detail.area == "retries":
        title = f"{detail.name} (retried attempt of {row.task_id})"
    instruction = detail.instruction
    recording = (f'<video controls preload="metadata" src="{esc(links.file(side, detail.recording))}"></video>'
                 if detail.recording else absent("no recording.mp4 (recording was off for this run)"))
    steps_note = (f"{len(detail.trajectory.steps)} steps · j/k or ←/→ to move" if detail.trajectory else "")
    body = (f'<h1 class="id">{esc(title)}</h1><p class="sub">{esc(row.domain)} · run {esc(run.run_id)}</p>'
            + _siblings(run, detail, links, side, compare)
            + section("Instruction", f'<pre class="instruction">{esc(instruction)}</pre>' if instruction else
                      absent("the instruction is recorded in trajectory.json, which this attempt does not have"))
            + f'<div class="top-grid">{section("Outcome", outcome(detail))}'
            f'{section("Evaluation", evaluation(detail, links, side))}</div>'
            + section("Phases", phases(detail.result))
            + (section("Final desktop", final_desktop(detail, str(run.run_dir))) if detail.area == "tasks" else "")
            + section("Steps", render_steps(detail, links, side), anchor="steps", note=steps_note)
            + section("Recording", recording)
            + section("Setup steps", setup_steps(detail.meta.record))
            + section("Guest, agent and probes (meta.json)", run_time(detail.meta))
            + section("Logs", logs(detail, links, side))
            + retried(detail, links, side)
            + section("Records", records(detail) or absent("no records"))
            + section("Files", files(detail, links, side)))
    crumbs = [(run.run_id, links.index()), (detail.name, None)]
    if side == "other":
        crumbs = [("compare", links.compare()), (f"{run.run_id} (compared run)", None), (detail.name, None)]
    return page(f"{row.task_id} · {run.run_id}", body, links, crumbs)
