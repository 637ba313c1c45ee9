"""What recording costs an agent phase: the same scripted agent phase (Claude Code on the test desktop, the
runner's own run_agent) with evidence off (the baseline), with computer-use's call log (the screen after each
action), and with the call log and the screen recording (ffmpeg x11grab in the guest), each run ROUNDS times in
a fresh guest, interleaved. Twice: with an instant scripted model (the worst case: no model time to hide any
cost in) and with one that takes THINK_SEC per answer (a fast real model).

Prints the median wall time of the phase itself (run_agent) and its ratio to the baseline (target: at most
1.05), and apart from it the recording's fixed cost: starting (the guest checks ffmpeg runs for 2 s before it
answers) and stopping (ffmpeg finishes the MP4, the guest sends it).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hcu.osworld.evidence.recording import recording  # noqa: E402
from tests.evidence.live_agent import live_run, policy  # noqa: E402

AGENT = "claude-code"
ROUNDS = 3
THINK_SEC = 2.0
STEPS = [
    {"tool": "key", "arguments": {"keys": ["ctrl+alt+t"]}},
    {"tool": "wait", "arguments": {"seconds": 1}},
    *[{"tool": "type", "arguments": {"text": f"echo step {i}\n"}} for i in range(6)],
    *[{"tool": "click", "arguments": {"x": 300 + 20 * i, "y": 300}} for i in range(4)],
    {"tool": "screenshot", "arguments": {}},
]
CONFIGS = {"evidence off (baseline)": (False, False), "call log": (True, False), "call log + video": (True, True)}


def one_phase(call_log: bool, video: bool, think_sec: float) -> tuple[float, float, int | None]:
    """(the phase's seconds, the recording's start + stop seconds, the recording's bytes)."""
    with tempfile.TemporaryDirectory(prefix="bench-recording-") as tmp, \
            live_run(AGENT, Path(tmp), policy(STEPS, think_sec=think_sec), call_log=call_log) as run:
        entered = time.perf_counter()
        with recording(run.api, run.result_dir, enabled=video) as report:
            started = time.perf_counter()
            outcome = run.run_agent(poll_sec=0.2)
            phase = time.perf_counter() - started
            leaving = time.perf_counter()
        fixed = (started - entered) + (time.perf_counter() - leaving)
        assert outcome.protocol_word == "TASK_COMPLETE", outcome
        assert report.error is None, report.error
        return phase, fixed, report.bytes


def measure(think_sec: float) -> None:
    phases: dict[str, list[float]] = {name: [] for name in CONFIGS}
    fixed: list[float] = []
    sizes: list[int] = []
    for _ in range(ROUNDS):
        for name, (call_log, video) in CONFIGS.items():
            phase, overhead, size = one_phase(call_log, video, think_sec)
            phases[name].append(phase)
            if video:
                fixed.append(overhead)
                sizes.append(size or 0)
    baseline = statistics.median(phases["evidence off (baseline)"])
    print(f"agent phase of {len(STEPS)} calls + final answer, {AGENT}, model answering in {think_sec:g} s, "
          f"{ROUNDS} rounds each")
    for name, samples in phases.items():
        median = statistics.median(samples)
        print(f"  {name:26s} phase median {median:6.2f} s  (x{median / baseline:5.3f} baseline; "
              f"runs {', '.join(f'{s:.2f}' for s in samples)})")
    print(f"  recording start + stop (fixed, outside the phase): median {statistics.median(fixed):.2f} s, "
          f"recording median {statistics.median(sizes) / 1e6:.2f} MB")


def main() -> int:
    for think_sec in (0.0, THINK_SEC):
        measure(think_sec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
