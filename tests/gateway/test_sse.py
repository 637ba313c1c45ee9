"""The incremental SSE parser: events complete only at their blank line, whatever the chunking; the bytes it
hands back for forwarding are exactly the complete events."""

from __future__ import annotations

import pytest

from hcu.gateway.sse import EventTooLarge, SseParser

STREAM = (
    b'event: response.created\ndata: {"a": 1}\n\n'
    b": keep-alive comment\n\n"
    b'data: {"b":\r\ndata: 2}\r\n\r\n'
    b"event: message_stop\ndata:{}\n\n"
    b"data: [DONE]\n\n"
)
EXPECTED = [("response.created", b'{"a": 1}'), (None, b'{"b":\n2}'), ("message_stop", b"{}"), (None, b"[DONE]")]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 16, len(STREAM)])
def test_any_chunking_gives_the_same_events_and_forwards_every_byte(size):
    parser = SseParser()
    events, forwarded = [], b""
    for i in range(0, len(STREAM), size):
        new, complete = parser.feed(STREAM[i : i + size])
        events += new
        forwarded += complete
    assert events == EXPECTED
    assert forwarded == STREAM and parser.rest() == b""


def test_an_unfinished_event_stays_buffered_and_is_not_forwarded_yet():
    parser = SseParser()
    assert parser.feed(b"event: x\ndata: 1\n") == ([], b"")
    assert parser.feed(b"\nevent: y\n") == ([("x", b"1")], b"event: x\ndata: 1\n\n")
    assert parser.rest() == b"event: y\n"


def test_a_terminator_split_across_chunks_and_a_mixed_one():
    parser = SseParser()
    assert parser.feed(b"data: a\r\n\r") == ([], b"")
    assert parser.feed(b"\ndata: b\n\r\n") == ([(None, b"a"), (None, b"b")], b"data: a\r\n\r\ndata: b\n\r\n")


def test_an_event_that_never_ends_is_cut_at_the_cap():
    parser = SseParser(max_event_bytes=1000)
    parser.feed(b"data: " + b"x" * 900)
    with pytest.raises(EventTooLarge):
        parser.feed(b"x" * 200)
