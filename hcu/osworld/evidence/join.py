"""The agent's steps: each generation of the model joined with what the CLI showed of it and what computer-use
recorded of its tool calls.

- A CLI's tool call is paired with computer-use's record of it: the next unpaired record of the same tool,
  preferring equal arguments. A record no CLI call names (a CLI whose stream lacks calls) joins by time.
- A paired call has a time (its guest start, on the host clock); the generation that asked for it is the one
  that started last before it (of two running side by side, the one that ended later: a CLI's side call, such
  as a session title, is short). Words and reasoning belong with the next call of their turn; those after a
  turn's last call are its final answer, from its last generation of the agent's model.
- Generations a turn made are those the token log ended before the runner kept the turn's events.
- Without times (no call log) or without a token log, a step starts wherever the CLI's output follows a tool
  call; such steps take the turn's generations in order from the last one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import orjson

from hcu.osworld.evidence.atif import (
    ContentPart,
    Observation,
    ObservationResult,
    Pointer,
    ResultExtra,
    Step,
    ToolCall,
    image_part,
    text_part,
)
from hcu.osworld.evidence.atif import iso_time as iso
from hcu.osworld.evidence.cli_trace import CliCall, CliItem, CliTurn
from hcu.osworld.evidence.generations import Generation
from hcu.osworld.evidence.guest_calls import GuestCall, GuestLog

ARGUMENT_MATCH_WINDOW = 20
"""Records looked ahead for a call with equal arguments before taking the next of the same tool."""


@dataclass
class Piece:
    item: CliItem
    guest: GuestCall | None = None

    @property
    def at(self) -> float | None:
        return self.guest.host_started_at if self.guest else None


@dataclass
class Segment:
    generation: Generation | None
    pieces: list[Piece] = field(default_factory=list)


def agent_steps(turns: list[CliTurn], log: GuestLog, generations: list[Generation], *, model: str,
                effort: str | None) -> list[tuple[int, list[Step]]]:
    """Per turn (its number), the agent steps it made, in order (step ids are given by the caller)."""
    turns = turns or [CliTurn(1)]  # no turn kept its events: computer-use's records still show the calls
    pieces = _pieces(turns, log)
    windows = _turn_generations(turns, generations)
    out = []
    for turn, turn_pieces, gens in zip(turns, pieces, windows, strict=True):
        if gens and any(p.at is not None for p in turn_pieces):
            segments = _by_generation(turn_pieces, gens, model)
        else:
            segments = _aligned(_by_output(turn_pieces), gens)
        out.append((turn.number, [_step(s, turn.number, model, effort) for s in segments]))
    return out


def _pieces(turns: list[CliTurn], log: GuestLog) -> list[list[Piece]]:
    pending = list(log.calls)
    per_turn = [[Piece(item) for item in turn.items] for turn in turns]
    for piece in (p for pieces in per_turn for p in pieces):
        call = piece.item.call
        if call is not None and call.tool is not None:
            piece.guest = _take_record(pending, call)
    ends = [t.ended_at for t in turns]
    for record in pending:  # computer-use saw a call the CLI did not show: joined by time
        index = next((i for i, end in enumerate(ends) if end is not None and record.host_started_at <= end),
                     len(turns) - 1)
        _insert_by_time(per_turn[index], Piece(_recorded_only(record), record))
    return per_turn


def _take_record(pending: list[GuestCall], call: CliCall) -> GuestCall | None:
    same_tool = [i for i, g in enumerate(pending[:ARGUMENT_MATCH_WINDOW * 4]) if g.record.tool == call.tool]
    if not same_tool:
        return None
    equal = [i for i in same_tool[:ARGUMENT_MATCH_WINDOW] if pending[i].record.arguments == call.tool_arguments]
    return pending.pop((equal or same_tool)[0])


def _recorded_only(record: GuestCall) -> CliItem:
    arguments = record.record.arguments or {}
    return CliItem("call", call=CliCall(call_id=record.key, function_name=record.record.tool, arguments=arguments,
                                        tool=record.record.tool, tool_arguments=arguments, seen_by_cli=False))


def _insert_by_time(pieces: list[Piece], piece: Piece) -> None:
    after = [i for i, p in enumerate(pieces) if p.at is not None and p.at <= (piece.at or 0.0)]
    pieces.insert(after[-1] + 1 if after else len(pieces), piece)


def _turn_generations(turns: list[CliTurn], generations: list[Generation]) -> list[list[Generation]]:
    bounds = [t.ended_at if t.ended_at is not None else math.inf for t in turns]
    windows: list[list[Generation]] = [[] for _ in turns]
    for gen in generations:
        index = next((i for i, bound in enumerate(bounds) if gen.ended_at <= bound), len(turns) - 1)
        windows[index].append(gen)
    return windows


def _by_generation(pieces: list[Piece], gens: list[Generation], model: str) -> list[Segment]:
    owners: list[int | None] = [_owner(p.at, gens) if p.at is not None else None for p in pieces]
    final = max((i for i, g in enumerate(gens) if g.row.model == model), default=len(gens) - 1)
    following: int | None = None
    for i in reversed(range(len(pieces))):  # untimed words go with the next call of the turn, else the final answer
        if owners[i] is None:
            owners[i] = following if following is not None else final
        following = owners[i]
    segments = [Segment(gen) for gen in gens]
    floor = 0
    for piece, owner in zip(pieces, owners, strict=True):
        floor = max(floor, owner or 0)  # in the CLI's order: a step never goes back to an earlier generation
        segments[floor].pieces.append(piece)
    return segments


def _owner(at: float, gens: list[Generation]) -> int:
    started = [i for i, g in enumerate(gens) if g.started_at <= at]
    if not started:
        return 0
    return max(started, key=lambda i: (gens[i].ended_at, gens[i].started_at))


def _by_output(pieces: list[Piece]) -> list[Segment]:
    segments: list[Segment] = []
    for piece in pieces:
        after_call = bool(segments) and any(p.item.kind == "call" for p in segments[-1].pieces)
        if not segments or (after_call and piece.item.kind != "error"):
            segments.append(Segment(None))
        segments[-1].pieces.append(piece)
    return segments


def _aligned(segments: list[Segment], gens: list[Generation]) -> list[Segment]:
    """Untimed output (no call log) paired with the turn's generations from the end: the last output is the last
    generation's; generations left over (side calls come first) are steps of their own."""
    paired = min(len(segments), len(gens))
    for segment, gen in zip(segments[len(segments) - paired:], gens[len(gens) - paired:], strict=True):
        segment.generation = gen
    leftover = [Segment(gen) for gen in gens[:len(gens) - paired]]
    return [*leftover, *segments]


def _step(segment: Segment, turn: int, model: str, effort: str | None) -> Step:
    gen, pieces = segment.generation, segment.pieces
    texts = {kind: "\n\n".join(p.item.text for p in pieces if p.item.kind == kind and p.item.text)
             for kind in ("message", "reasoning")}
    calls = [p for p in pieces if p.item.call is not None]
    extra: dict = {"turn": turn}
    if errors := [p.item.text for p in pieces if p.item.kind == "error"]:
        extra["cli_errors"] = errors
    if gen is not None:
        extra["generation"] = {"host_started_at": iso(gen.started_at), "host_ended_at": iso(gen.ended_at)}
        if not pieces:
            extra["note"] = "the CLI showed nothing of this generation (a side call, such as a session title)"
    first_at = gen.started_at if gen else next((p.at for p in pieces if p.at is not None), None)
    return Step(
        step_id=0, timestamp=iso(first_at), source="agent",
        model_name=gen.row.model if gen and gen.row.model else model, reasoning_effort=effort,
        message=texts["message"], reasoning_content=texts["reasoning"] or None,
        tool_calls=[_tool_call(p) for p in calls] or None,
        observation=Observation(results=[_result(p) for p in calls]) if calls else None,
        metrics=gen.metrics() if gen else None, llm_call_count=1 if gen else None, extra=extra,
    )


def _tool_call(piece: Piece) -> ToolCall:
    call = piece.item.call
    assert call is not None
    return ToolCall(tool_call_id=call.call_id, function_name=call.function_name, arguments=call.arguments)


def _result(piece: Piece) -> ObservationResult:
    call, guest = piece.item.call, piece.guest
    assert call is not None
    if guest is None:
        return ObservationResult(source_call_id=call.call_id, content=_text(call.result),
                                 extra=ResultExtra(error=call.error, recorded_by=["cli"]))
    record, shot = guest.record, guest.shot
    pointer = None
    if shot is not None and shot.pointer is not None and shot.screen_width:
        pointer = Pointer(x=shot.pointer[0], y=shot.pointer[1], screen_width=shot.screen_width,
                          screen_height=shot.screen_height)
    extra = ResultExtra(
        error=record.error, pointer=pointer,
        guest_started_at=iso(record.started_at), guest_ended_at=iso(record.ended_at) if guest.finished else None,
        duration_sec=round(record.ended_at - record.started_at, 3) if guest.finished else None,
        host_started_at=iso(guest.host_started_at), host_ended_at=iso(guest.host_ended_at) if guest.finished else None,
        in_flight=None if guest.finished else True,
        recorded_by=["cli", "computer-use"] if call.seen_by_cli else ["computer-use"], images=record.images or None,
        clipped_chars=record.clipped_chars or None, dropped=record.dropped,
    )
    text = record.result if record.result is not None else _text(call.result)
    return ObservationResult(source_call_id=call.call_id, content=_content(text, guest.screenshot), extra=extra)


def _content(text: str | None, screenshot: str | None) -> str | list[ContentPart] | None:
    """The result's text, with the screen computer-use kept of the call as an image part beside it."""
    if screenshot is None:
        return text
    return [*([text_part(text)] if text is not None else []), image_part(screenshot)]


def _text(value: object) -> str | None:
    """A CLI's rendering of a tool result as text: its text parts, else its JSON."""
    if value is None or isinstance(value, str):
        return value
    parts = value.get("content") if isinstance(value, dict) else value
    if isinstance(parts, list):
        texts = [p.get("text") for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
        if texts:
            return "\n".join(texts)
    return orjson.dumps(value, default=str).decode()
