"""What a quota delivered, per resource over its throttled minutes, the arithmetic done by hand."""

from __future__ import annotations

import pytest

from hcu.osworld.quota.delivered import DeliveredMeter, ResourceDelivered, per_minute

MINUTE = 28_333_334 * 60
"""A minute's first second."""


def test_each_resource_counts_its_own_throttled_minutes() -> None:
    meter = DeliveredMeter()
    for m in range(4):  # r1: four minutes of 90k tokens in 3 calls, every one with a wait
        meter.add(MINUTE + 60 * m + 10, "r1", True, 60_000, 2)
        meter.add(MINUTE + 60 * m + 50, "r1", False, 30_000, 1)
    for m in range(5):  # r2: waits in minutes 0, 2 and 4 only (40k each), 10k in the others
        meter.add(MINUTE + 60 * m + 5, "r2", m % 2 == 0, 40_000 if m % 2 == 0 else 10_000, 1)
    meter.add(MINUTE + 30, None, True, 0, 0)  # refused before it reached a resource: says nothing
    delivered = meter.delivered()
    assert delivered is not None and delivered.by_resource == {
        "r1": ResourceDelivered(minutes=4, tokens=360_000, calls=12),
        "r2": ResourceDelivered(minutes=3, tokens=120_000, calls=3)}
    # r1 90k a minute, r2 40k: 130k; calls 3 + 1
    assert per_minute([delivered], "tpm") == pytest.approx(130_000)
    assert per_minute([delivered], "rpm") == pytest.approx(4)
    # a second pilot on the same resources: per resource, its totals over its minutes (r1 (360k + 60k) / 5)
    second = DeliveredMeter()
    for m in range(3):
        second.add(MINUTE + 60 * m, "r1", m == 0, 60_000, 1)
        second.add(MINUTE + 60 * m, "r2", True, 40_000, 1)
    both = [delivered, second.delivered()]
    assert both[1] is None, "r1 was throttled one minute in it: it says nothing of the whole"
    second.add(MINUTE + 60 * 3, "r1", True, 0, 0)
    second.add(MINUTE + 60 * 4, "r1", True, 0, 0)
    both[1] = second.delivered()
    assert per_minute(both, "tpm") == pytest.approx((360_000 + 60_000) / 7 + (120_000 + 120_000) / 6)
