"""The probe's host-side verdict on screenshot evidence when the server downscales for a provider."""

from __future__ import annotations

import base64
import io

from PIL import Image

from hcu.osworld.attempt.mcp_probe import judge


def _raw(width: int, height: int) -> dict:
    png = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(png, format="PNG")
    return {
        "protocol_negotiated": "2025-11-25",
        "tools": ["screenshot"],
        "steps": [{"name": n, "error": None, "seconds": 0.1} for n in ("initialize", "tools", "screenshot")],
        "evidence": {"screenshot": {"png_b64": base64.b64encode(png.getvalue()).decode()}},
    }


def _screenshot_check(raw: dict, max_width: int | None) -> str:
    checks = judge(raw, ["gui"], "2025-11-25", (1920, 1080), max_width=max_width)
    return next(c for c in checks if c.name == "screenshot").status


def test_a_downscaled_screenshot_passes_only_when_the_server_was_told_to_downscale() -> None:
    assert _screenshot_check(_raw(1280, 720), max_width=1280) == "passed"
    assert _screenshot_check(_raw(1280, 720), max_width=None) == "failed"
    assert _screenshot_check(_raw(1920, 1080), max_width=None) == "passed"
    assert _screenshot_check(_raw(1920, 1080), max_width=1280) == "failed"
