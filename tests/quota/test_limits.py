"""The quota model: which keys name the run, what a set of upstreams serves, and the sample statistics."""

from __future__ import annotations

import pytest

from hcu.osworld.quota.limits import QuotaLimit, capacity, key_problem, unmatched_key, upstreams_in_args
from hcu.osworld.quota.stats import spread, sum_range, t_quantile

UPSTREAMS = ["r1.example@d1", "r1.example@d2", "r2.example:8443"]


def test_keys_are_providers_or_upstream_labels() -> None:
    assert [key_problem(key) for key in ("openai", "r1.example", "r1.example@d1", "r2.example:8443")] == [None] * 4
    assert "expected a provider" in str(key_problem("not a host!"))
    assert key_problem("a.example,b.example") == "one upstream per key"


def test_a_key_no_upstream_or_provider_of_the_run_matches_is_named() -> None:
    assert unmatched_key({"openai": QuotaLimit(tpm=1), "r1.example": QuotaLimit(tpm=1),
                          "r1.example@d2": QuotaLimit(rpm=1)}, "openai", UPSTREAMS) is None
    assert unmatched_key({"r3.example": QuotaLimit(tpm=1)}, "openai", UPSTREAMS) == (
        "quota.r3.example: no gateway upstream or provider of this run is named r3.example (provider: openai; "
        "upstreams: r1.example@d1, r1.example@d2, r2.example:8443)")
    assert unmatched_key({"anthropic": QuotaLimit(tpm=1)}, "openai", None).startswith("quota.anthropic: no gateway")
    assert unmatched_key({"r3.example": QuotaLimit(tpm=1)}, "openai", None) is None, "upstreams unknown: not checked"


def test_upstreams_are_read_from_the_gateway_flags() -> None:
    assert upstreams_in_args(["--upstreams", "r1.example@d1,r2.example", "--upstream-kind", "azure"]) == [
        "r1.example@d1", "r2.example"]
    assert upstreams_in_args(["--upstreams=r1.example"]) == ["r1.example"]
    assert upstreams_in_args(["--upstream-kind", "azure"]) is None


def test_what_the_upstreams_serve() -> None:
    deployments = {"r1.example@d1": QuotaLimit(tpm=30_000, rpm=180), "r1.example@d2": QuotaLimit(tpm=20_000)}
    served, notes = capacity(deployments, "openai", UPSTREAMS, "tpm")
    assert (served.per_minute, served.of) == (50_000, "tpm of r1.example@d1 + r1.example@d2")
    assert notes == ["tpm: no quota for upstream r2.example:8443, not counted"]
    resource_cap = {**deployments, "r1.example": QuotaLimit(tpm=40_000), "r2.example:8443": QuotaLimit(tpm=5_000)}
    served, notes = capacity(resource_cap, "openai", UPSTREAMS, "tpm")
    assert (served.per_minute, served.of, notes) == (45_000, "tpm of r1.example + r2.example:8443", [])
    rpm, _ = capacity(deployments, "openai", UPSTREAMS, "rpm")
    assert rpm is None, "d2 has no rpm and r1.example none of its own: r1's requests per minute are unknown"
    unknown_upstreams, _ = capacity(deployments, "openai", None, "tpm")
    assert unknown_upstreams.per_minute == 50_000, "the quota's own keys stand for the upstreams"


def test_a_limit_is_a_positive_integer() -> None:
    with pytest.raises(ValueError, match="greater than 0"):
        QuotaLimit(tpm=-5)
    with pytest.raises(ValueError, match="valid integer"):
        QuotaLimit.model_validate({"tpm": "many"})
    with pytest.raises(ValueError, match="expected tpm, rpm or both"):
        QuotaLimit()


def test_percentiles_and_prediction_intervals_by_hand() -> None:
    assert spread([10, 20, 30, 40, 50]).p90 == pytest.approx(46)  # position 3.6: 40 + 0.6 * 10
    assert spread([7]).p90 == 7
    assert [round(t_quantile(0.95, df), 3) for df in (1, 4, 9, 30)] == [6.314, 2.132, 1.833, 1.697]  # printed tables
    assert t_quantile(0.95, 100_000) == pytest.approx(1.6449, abs=1e-4)
    sample = [2.0, 4.0, 6.0]  # mean 4, s^2 = 4
    expected, half = 10 * 4.0, 2.920 * (4 * (10 + 100 / 3)) ** 0.5
    assert sum_range(sample, 10).model_dump() == pytest.approx(
        {"low": expected - half, "expected": expected, "high": expected + half}, rel=1e-3)
    assert sum_range(sample, 0).model_dump() == {"low": 0.0, "expected": 0.0, "high": 0.0}
    assert sum_range([], 3).expected is None
    assert sum_range([1.0, 1.0, 100.0], 1).low == 0.0, "clipped at 0"
