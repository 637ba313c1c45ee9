"""The token and timing profile of a computer-use attempt, for bench_quota.py: what each stand-in attempt does and
asks of the model, drawn once per task from a seeded generator so that every setting runs the same attempts.

Where the figures come from:
- calls per attempt: an OSWorld attempt is tens to hundreds of model calls, each with one or more screenshots and
  the growing history; Simular's published OSWorld 2.1 reference campaign made 27,662 gateway calls over 324
  attempts (about 85 each) for $2,417.63 (about $7.50 each). Here lognormal, median CALLS_MEDIAN, clipped to
  CALLS_RANGE: the shorter end, so that a setting's campaign fits the benchmark's few minutes.
- the prompt: each call carries the task's instructions and tool schemas (SYSTEM_TOKENS) and the whole history,
  one screenshot (SCREENSHOT_TOKENS: OpenAI counts a 1280x720 screenshot in high detail as 6 tiles of 170 tokens
  plus 85) and a few lines of text (STEP_TEXT_TOKENS) per step, most of it cached after the first calls: the
  upstream caches each conversation's prefix, so every call but the first reads the previous call's prompt from the
  cache (OpenAI's and Azure's prompt cache, in blocks of 128 tokens from 1,024 on). OpenAI and Azure count the
  whole prompt, cached or not, against a tokens-per-minute limit.
- the output: reasoning plus one action, lognormal around OUTPUT_MEDIAN; each call reserves MAX_OUTPUT_TOKENS,
  which Azure charges at arrival with the prompt (its quota documentation).
- time: MODEL_SEC_MEDIAN seconds of model time per call, ACTION_SEC for the action and the next screenshot in the
  guest, boot and setup before the agent, evaluation after it (the phase lengths of bench_campaign.py's fleet).
The result: about 1.07M tokens charged and 10 minutes per attempt, a few hundred thousand tokens a minute in an
attempt's late steps, more than one deployment of 150k TPM gives (a computer-use attempt of a reasoning model can
outrun a small deployment alone); about $0.36 per attempt at PRICES, a twentieth of the reference campaign's,
whose attempts were longer.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

from hcu.scripted.rate_limits import prompt_tokens
from hcu.scripted.replies import Reply, ScriptedRequest, TextReply, Usage

MODEL = "gpt-5"
PRICES = {MODEL: {"input_usd_per_mtok": 1.25, "cached_input_usd_per_mtok": 0.125, "output_usd_per_mtok": 10.0}}
"""GPT-5's list prices (USD per million tokens): uncached input, cached input, output."""
CALLS_MEDIAN, CALLS_SIGMA, CALLS_RANGE = 30, 0.4, (12, 60)
SYSTEM_TOKENS = 5_000
SCREENSHOT_TOKENS = 1_105
STEP_TEXT_TOKENS = 150
OUTPUT_MEDIAN, OUTPUT_SIGMA, OUTPUT_RANGE = 500, 0.6, (50, 4_000)
MAX_OUTPUT_TOKENS = 4_096
MODEL_SEC_MEDIAN, MODEL_SEC_SIGMA, MODEL_SEC_RANGE = 10.0, 0.5, (2.0, 60.0)
ACTION_SEC = (1.5, 3.0)
BOOT_SETUP_SEC = (60.0, 150.0)
EVALUATE_SEC = (10.0, 45.0)
CACHE_BLOCK = 128
"""The prompt cache holds whole blocks of this many tokens, from 1,024 on (OpenAI's and Azure's)."""
IMAGE_URL = "data:image/png;base64,iVBORw0KGgo="
"""A screenshot in the prompt: the limiter and the usage count it as SCREENSHOT_TOKENS, whatever its bytes."""
FILLER = "word "
"""Text of the prompt: 4 characters count as a token."""


@dataclass(frozen=True)
class Call:
    """One model call of an attempt (simulated seconds)."""

    output_tokens: int
    model_sec: float
    action_sec: float
    """The action and the next screenshot, after the answer."""


@dataclass(frozen=True)
class AttemptPlan:
    boot_setup_sec: float
    calls: list[Call]
    evaluate_sec: float

    @property
    def unthrottled_sec(self) -> float:
        """The attempt with no wait on the model: its phases and every call's model and action time."""
        return self.boot_setup_sec + self.evaluate_sec + sum(c.model_sec + c.action_sec for c in self.calls)

    @property
    def charged_tokens(self) -> int:
        """What the quota charges the attempt at arrival: every call's prompt plus its reserved output."""
        return sum(prompt_at(step) + MAX_OUTPUT_TOKENS for step in range(len(self.calls)))


def _lognormal(rng: random.Random, median: float, sigma: float, bounds: tuple[float, float]) -> float:
    low, high = bounds
    return min(high, max(low, rng.lognormvariate(0.0, sigma) * median))


def plan_attempt(rng: random.Random) -> AttemptPlan:
    count = round(_lognormal(rng, CALLS_MEDIAN, CALLS_SIGMA, CALLS_RANGE))
    calls = [Call(round(_lognormal(rng, OUTPUT_MEDIAN, OUTPUT_SIGMA, OUTPUT_RANGE)),
                  _lognormal(rng, MODEL_SEC_MEDIAN, MODEL_SEC_SIGMA, MODEL_SEC_RANGE), rng.uniform(*ACTION_SEC))
             for _ in range(count)]
    return AttemptPlan(rng.uniform(*BOOT_SETUP_SEC), calls, rng.uniform(*EVALUATE_SEC))


def plan_tasks(prefix: str, count: int, seed: int) -> dict[str, AttemptPlan]:
    """`count` tasks named `<prefix>000`...; a task's plan is the same in every run of the same seed."""
    rng = random.Random(seed)
    return {f"{prefix}{index:03d}": plan_attempt(rng) for index in range(count)}


_STEP_TEXT = FILLER * STEP_TEXT_TOKENS
_SYSTEM_TEXT = FILLER * SYSTEM_TOKENS


@cache
def prompt_at(step: int) -> int:
    """The prompt of call `step` as the quota counts it (a gateway scope of a typical length as its cache key)."""
    return prompt_tokens(request_body(step, "campaign.t000.a1"), SCREENSHOT_TOKENS)


def request_body(step: int, cache_key: str) -> dict:
    """The Responses request of call `step` (0-based): instructions, then every step so far with its screenshot."""
    history: list[dict] = []
    for earlier in range(step + 1):
        content: list[dict] = [{"type": "input_image", "image_url": IMAGE_URL}]
        if earlier:
            content.append({"type": "input_text", "text": _STEP_TEXT})
        history.append({"role": "user", "content": content})
    return {"model": MODEL, "instructions": _SYSTEM_TEXT, "input": history, "stream": True, "store": False,
            "max_output_tokens": MAX_OUTPUT_TOKENS, "prompt_cache_key": cache_key}


OUTPUT_HEADER, MODEL_SEC_HEADER = "x-bench-output-tokens", "x-bench-model-sec"
"""What the stand-in agent tells the scripted model about the call it makes (the profile decides both)."""


@dataclass
class ProfileModel:
    """The scripted model: answers after the call's model time (compressed by `sleep`), with the usage a prompt
    cache gives (each conversation's previous prompt, in whole blocks, is read from the cache)."""

    sleep: Callable[[float], object]
    """An async sleep of simulated seconds."""
    image_tokens: int = SCREENSHOT_TOKENS
    cached: dict[str, int] = field(default_factory=dict)
    """Per prompt_cache_key: the prompt of its last call."""

    async def __call__(self, req: ScriptedRequest) -> Reply:
        body = req.body if isinstance(req.body, dict) else {}
        prompt = prompt_tokens(body, self.image_tokens)
        key = str(body.get("prompt_cache_key"))
        previous = min(self.cached.get(key, 0), prompt)
        self.cached[key] = prompt
        cached = previous // CACHE_BLOCK * CACHE_BLOCK if previous >= 1024 else 0
        await self.sleep(float(req.headers.get(MODEL_SEC_HEADER, "1")))  # type: ignore[misc]
        output = int(req.headers.get(OUTPUT_HEADER, "100"))
        return TextReply("action", Usage(input_tokens=prompt, cached_input_tokens=cached, output_tokens=output))


def call_headers(call: Call) -> dict[str, str]:
    return {OUTPUT_HEADER: str(call.output_tokens), MODEL_SEC_HEADER: f"{call.model_sec:.3f}"}

