"""An attempt's steps as cards: the model's text and reasoning, each tool call with its arguments and result,
the screen after it with a mark where a pointer action landed, and the step's tokens, cost, latency and
rate-limit wait. Without a trajectory, the CLI's own events (agent.jsonl) stand in."""

from __future__ import annotations

from typing import Any

import orjson

from hcu.osworld.agents.events import TraceItem
from hcu.osworld.evidence.atif import ContentPart, ObservationResult, Step, ToolCall, Trajectory
from hcu.osworld.view.attempt_data import AttemptDetail
from hcu.osworld.view.html import absent, badge, count, details, esc, kv, seconds, usd
from hcu.osworld.view.links import Links, Side
from hcu.osworld.view.paths import join_inside

RESULT_SHOWN_CHARS = 1500
"""A tool result longer than this is folded (its whole text one click away)."""


def _compact(value: Any) -> str:
    return orjson.dumps(value, default=str).decode()


def _content_text(content: str | list[Any] | None) -> str:
    """Text and the names of other parts: a trajectory result's content (its image parts are shown as
    screenshots, not named) or an MCP result's content parts (images named, not inlined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if isinstance(part, ContentPart):
            if part.type != "image":
                parts.append(part.text if part.text is not None else f"[{part.type}]")
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
        elif isinstance(part, dict):
            parts.append(f"[{part.get('type', 'part')}]")
        else:
            parts.append(str(part))
    return "\n".join(parts)


def _folded(text: str, cls: str) -> str:
    if len(text) <= RESULT_SHOWN_CHARS:
        return f'<pre class="{cls}">{esc(text)}</pre>'
    return details(f'<pre class="{cls} inline">{esc(text[:200])}…</pre> ({len(text):,} chars)',
                   f'<pre class="{cls}">{esc(text)}</pre>')


def screenshot(detail: AttemptDetail, result: ObservationResult, links: Links, side: Side) -> str:
    shot, pointer = result.screenshot, result.extra.pointer if result.extra is not None else None
    if not shot:
        return ""
    relative = join_inside(detail.folder, shot)
    if relative is None:
        return absent(f"screenshot path {shot!r} leaves the attempt folder: not shown")
    mark = ""
    if pointer is not None and pointer.screen_width > 0 and pointer.screen_height > 0:
        left, top = 100 * pointer.x / pointer.screen_width, 100 * pointer.y / pointer.screen_height
        mark = (f'<span class="mark" style="left:{left:.3f}%;top:{top:.3f}%" '
                f'title="pointer at ({pointer.x:g}, {pointer.y:g}) of {pointer.screen_width}×'
                f'{pointer.screen_height}"></span>')
    src = esc(links.file(side, relative))
    return (f'<figure class="shot"><div class="frame"><img src="{src}" loading="lazy" alt="screen after the call">'
            f'{mark}</div><figcaption><a href="{src}">{esc(shot)}</a></figcaption></figure>')


def _call(call: ToolCall, result: ObservationResult | None) -> str:
    args = _compact(call.arguments)
    head = f'<div class="call-head"><code class="fn">{esc(call.function_name)}</code>'
    if result is not None and result.extra is not None:
        if result.extra.error:
            head += " " + badge("error", "fail")
        if result.extra.duration_sec is not None:
            head += f' <span class="dim">{seconds(result.extra.duration_sec)}</span>'
    head += "</div>"
    body = _folded(args, "args")
    if result is not None:
        body += _folded(_content_text(result.content), "result")
    else:
        body += absent("no result recorded for this call")
    return f'<div class="call">{head}{body}</div>'


def _metrics(step: Step) -> str:
    m = step.metrics
    if m is None:
        return ""
    extra = m.extra or {}
    bits = [f"in {count(m.prompt_tokens)}", f"out {count(m.completion_tokens)}"]
    if m.cached_tokens:
        bits.append(f"cached {count(m.cached_tokens)}")
    if extra.get("reasoning_tokens"):
        bits.append(f"reasoning {count(extra['reasoning_tokens'])}")
    if isinstance(extra.get("latency_sec"), (int, float)):
        bits.append(f"latency {seconds(extra['latency_sec'])}")
    if extra.get("rate_limit_wait_sec"):
        bits.append(f'<span class="warn-text">rate-limit wait {seconds(extra["rate_limit_wait_sec"])}</span>')
    if m.cost_usd is not None:
        bits.append(usd(m.cost_usd))
    return f'<span class="metrics">{" · ".join(bits)}</span>'


def _results_by_call(step: Step) -> dict[str | None, ObservationResult]:
    results = step.observation.results if step.observation else []
    return {result.source_call_id: result for result in results}


def step_card(detail: AttemptDetail, step: Step, links: Links, side: Side) -> str:
    results = _results_by_call(step)
    calls = step.tool_calls or []
    shots = "".join(screenshot(detail, results[c.tool_call_id], links, side) for c in calls
                    if c.tool_call_id in results)
    unmatched = [r for cid, r in results.items() if cid not in {c.tool_call_id for c in calls}]
    shots += "".join(screenshot(detail, r, links, side) for r in unmatched)
    text = f'<div class="message">{esc(step.message)}</div>' if step.message else ""
    if step.reasoning_content:
        text += details("reasoning", f'<pre class="reasoning">{esc(step.reasoning_content)}</pre>')
    text += "".join(_call(c, results.get(c.tool_call_id)) for c in calls)
    text += "".join(f'<div class="call">{_folded(_content_text(r.content), "result")}</div>' for r in unmatched)
    stamp = f'<span class="dim">{esc(step.timestamp)}</span>' if step.timestamp else ""
    head = (f'<header><a class="step-no" href="#step-{step.step_id}">#{step.step_id}</a> '
            f'{badge(step.source, "src")} {stamp} {_metrics(step)}</header>')
    return (f'<article class="step" id="step-{step.step_id}" data-step="{step.step_id}">{head}'
            f'<div class="step-body"><div class="step-text">{text}</div>'
            f'<div class="step-shots">{shots}</div></div></article>')


def first_screenshot(detail: AttemptDetail, step: Step) -> str | None:
    for result in (step.observation.results if step.observation else []):
        if result.screenshot:
            return join_inside(detail.folder, result.screenshot)
    return None


def filmstrip(detail: AttemptDetail, trajectory: Trajectory, links: Links, side: Side) -> str:
    cells = []
    for step in trajectory.steps:
        shot = first_screenshot(detail, step)
        errored = any(r.extra is not None and r.extra.error
                      for r in (step.observation.results if step.observation else []))
        inner = (f'<img src="{esc(links.file(side, shot))}" loading="lazy" alt="">' if shot else
                 f'<span class="no-shot">{esc(step.source)}</span>')
        cells.append(f'<a class="thumb{" err" if errored else ""}" href="#step-{step.step_id}" '
                     f'title="step {step.step_id}">{inner}<span>{step.step_id}</span></a>')
    return f'<nav class="filmstrip">{"".join(cells)}</nav>'


def _result_text(result: Any) -> str:
    """A CLI event's tool result: an MCP result's content parts as text (images named, not inlined)."""
    if isinstance(result, dict) and isinstance(result.get("content"), list):
        return _content_text(result["content"])
    return result if isinstance(result, str) else _compact(result)


def event_item(item: TraceItem) -> str:
    kind = item.kind
    turn = f'<span class="dim">turn {esc(item.turn)}</span> ' if item.turn is not None else ""
    if kind in ("message", "reasoning", "output", "error"):
        body = f'<pre class="{esc(kind)}">{esc(item.text or "")}</pre>'
    elif kind == "tool_call":
        body = (f'<code class="fn">{esc(item.name)}</code>' + _folded(_compact(item.arguments), "args")
                + _folded(_result_text(item.result), "result"))
    else:
        body = _folded(_compact(item.model_dump(mode="json", exclude={"kind", "turn"}, exclude_unset=True)), "args")
    return f'<div class="event ev-{esc(kind)}">{turn}{badge(kind, "src")}{body}</div>'


def _step_tokens(step: Step) -> int:
    m = step.metrics
    return 0 if m is None else (m.prompt_tokens or 0) + (m.completion_tokens or 0)


def overview(trajectory: Trajectory) -> str:
    """Who acted, the totals over the steps, what the trajectory says it left out, and tokens per step."""
    metrics = [step.metrics for step in trajectory.steps if step.metrics is not None]
    extras = [m.extra or {} for m in metrics]
    costs = [m.cost_usd for m in metrics if m.cost_usd is not None]
    agent = trajectory.agent
    facts = [("agent", esc(f"{agent.name} {agent.version}" + (f" · {agent.model_name}" if agent.model_name else ""))),
             ("tokens", f"in {count(sum(m.prompt_tokens or 0 for m in metrics))} · out "
                        f"{count(sum(m.completion_tokens or 0 for m in metrics))} · cached "
                        f"{count(sum(m.cached_tokens or 0 for m in metrics))}"),
             ("model latency", seconds(sum(e.get("latency_sec") or 0 for e in extras))),
             ("rate-limit waits", seconds(sum(e.get("rate_limit_wait_sec") or 0 for e in extras))),
             ("cost", usd(sum(costs)) if costs and len(costs) == len(metrics) else "unknown")]
    facts += [(f"trajectory {key}", f"<code>{esc(value)}</code>") for key, value in (trajectory.extra or {}).items()
              if key != "attempt_id"]
    peak = max((_step_tokens(step) for step in trajectory.steps), default=0) or 1
    bars = "".join(f'<a href="#step-{step.step_id}" style="height:{max(2, 100 * _step_tokens(step) / peak):.0f}%" '
                   f'title="step {step.step_id}: {count(_step_tokens(step))} tokens"></a>' for step in trajectory.steps)
    return kv(facts, "facts") + f'<div class="tokenbars" title="tokens per step">{bars}</div>'


def render_steps(detail: AttemptDetail, links: Links, side: Side = "this") -> str:
    if detail.trajectory is not None:
        steps = detail.trajectory.steps
        if not steps:
            return absent("the trajectory has no steps")
        return overview(detail.trajectory) + filmstrip(detail, detail.trajectory, links, side) + "".join(
            step_card(detail, step, links, side) for step in steps)
    shown = absent(detail.trajectory_problem or "no trajectory")
    if not detail.events:
        return shown + absent("no agent.jsonl either: the agent phase did not run or left no events")
    return shown + f'<p class="dim">The CLI\'s events from agent.jsonl ({len(detail.events)}):</p>' + "".join(
        event_item(item) for item in detail.events)
