"""What recording costs an agent phase: the same scripted agent phase (Claude Code on the test desktop, the
runner's own run_agent, an instant scripted model: the worst case, with no model time to hide the cost in) with
evidence off, with computer-use's call log (the screen after each action), and with the call log and the screen
recording (ffmpeg x11grab in the guest). Each configuration runs ROUNDS times in a fresh guest, interleaved;
prints the median phase wall time and its ratio to the run without either (target: at most 1.05).
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
STEPS = [
    {"tool": "key", "arguments": {"keys": ["ctrl+alt+t"]}},
    {"tool": "wait", "arguments": {"seconds": 1}},
    *[{"tool": "type", "arguments": {"text": f"echo step {i}\n"}} for i in range(6)],
    *[{"tool": "click", "arguments": {"x": 300 + 20 * i, "y": 300}} for i in range(4)],
    {"tool": "screenshot", "arguments": {}},
]
CONFIGS = {"evidence off (baseline)": (False, False), "call log": (True, False), "call log + video": (True, True)}


def phase_seconds(call_log: bool, video: bool) -> tuple[float, int | None]:
    with tempfile.TemporaryDirectory(prefix="bench-recording-") as tmp, \
            live_run(AGENT, Path(tmp), policy(STEPS), call_log=call_log) as run:
        started = time.perf_counter()
        with recording(run.api, run.result_dir, enabled=video) as report:
            outcome = run.run_agent(poll_sec=0.2)
        seconds = time.perf_counter() - started
        assert outcome.protocol_word == "TASK_COMPLETE", outcome
        assert report.error is None, report.error
        return seconds, report.bytes


def main() -> int:
    times: dict[str, list[float]] = {name: [] for name in CONFIGS}
    sizes: dict[str, list[int]] = {name: [] for name in CONFIGS}
    for _ in range(ROUNDS):
        for name, (call_log, video) in CONFIGS.items():
            seconds, size = phase_seconds(call_log, video)
            times[name].append(seconds)
            if size:
                sizes[name].append(size)
    baseline = statistics.median(times["evidence off (baseline)"])
    print(f"agent phase of {len(STEPS)} calls + final answer, {AGENT}, {ROUNDS} rounds each")
    for name, samples in times.items():
        median = statistics.median(samples)
        size = f", recording {statistics.median(sizes[name]) / 1e6:.1f} MB" if sizes[name] else ""
        print(f"{name:26s} median {median:6.2f} s  (x{median / baseline:5.3f} baseline; "
              f"runs {', '.join(f'{s:.2f}' for s in samples)}){size}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
