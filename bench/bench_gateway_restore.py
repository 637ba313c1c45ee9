"""Gateway restart on a long token log: time and memory to rebuild every task's counters from 1,000,000 rows.

The log is written here (20,000 task scopes, a realistic mix of successes, failures, rate-limit waits,
refusals, free calls and aggregate rows of refusals, rows as the gateway writes them), then read by
`hcu.gateway.restore.restore`. The baseline, run in the same process on the same file, is the least any reader
pays: read the file in chunks and split every row into its fields, doing nothing with them.

    python bench/bench_gateway_restore.py [--rows N]

Target: 1,000,000 rows in <= 3 s. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import tempfile
import time
import tracemalloc
from pathlib import Path

import orjson

from hcu.gateway.restore import CHUNK_BYTES, restore
from hcu.gateway.tokenlog import read_token_log

OUTCOMES = ["success"] * 80 + ["failed"] * 6 + ["rate_limited"] * 3 + ["free"] * 6 + ["refused_budget"] * 2 + [
    "disconnected", "refused_route", "invalid_request", "refusals"]
REFUSAL_KINDS = ["refused_route", "invalid_request", "refused_budget", "refused_flood"]


def write_log(path: Path, rows: int, tasks: int) -> None:
    rng = random.Random(7)
    with path.open("wb") as f:
        batch = []
        for i in range(rows):
            outcome = rng.choice(OUTCOMES)
            task = f"{rng.randrange(tasks):08x}-28a6-4169-924f-b9623e7184cc.a{1 + rng.randrange(3)}"
            batch.append(orjson.dumps({
                "time": 1764500000.0 + i * 0.01, "task": task, "provider": "openai",
                "upstream": f"res{rng.randrange(4)}.openai.azure.com", "deployment": f"gpt-dep-{rng.randrange(2)}",
                "model": "gpt-5.4", "path": "/v1/responses", "status": 200 if outcome == "success" else 500,
                "outcome": outcome, "counted": outcome == "success", "calls_used": rng.randrange(100),
                "usage": {"input_tokens": rng.randrange(200000), "cached_input_tokens": rng.randrange(100000),
                          "output_tokens": rng.randrange(5000), "reasoning_tokens": rng.randrange(3000)}
                if outcome == "success" else None,
                "latency_sec": round(rng.random() * 30, 4), "ttfb_sec": round(rng.random() * 3, 4),
                "rate_limit_wait_sec": round(rng.random() * 20, 3) if outcome == "rate_limited" else 0.0,
                "attempts": 1 + (outcome == "rate_limited"), "upstream_request_id": f"req_{rng.getrandbits(128):032x}",
                "response_id": f"resp_{rng.getrandbits(128):032x}" if outcome == "success" else None,
                **({"refusals": {"count": 600, "kinds": {rng.choice(REFUSAL_KINDS): 600}, "first": 1764500000.0,
                                 "last": 1764500060.0}} if outcome == "refusals" else {}),
            }) + b"\n")
            if len(batch) == 10000:
                f.write(b"".join(batch))
                batch.clear()
        f.write(b"".join(batch))


def floor(path: Path) -> int:
    """Read in the same chunks and split every row into its fields; nothing else."""
    rows = 0
    with path.open("rb") as f:
        rest = b""
        while chunk := f.read(CHUNK_BYTES):
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                line.split(b',"', 11)
            rows += len(lines)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    rows = parser.parse_args().rows
    with tempfile.TemporaryDirectory(prefix="bench-restore-") as tmp:
        log = Path(tmp) / "gateway-tokens.jsonl"
        write_log(log, rows, tasks=20_000)
        size_mb = log.stat().st_size / 1e6
        floor(log)  # page cache warm for both
        times, floors, cpu = [], [], []
        for _ in range(3):  # interleaved: both see the same background load
            began = time.perf_counter()
            floor(log)
            floors.append(time.perf_counter() - began)
            began, began_cpu = time.perf_counter(), time.process_time()
            restored = restore(log)
            times.append(time.perf_counter() - began)
            cpu.append(time.process_time() - began_cpu)
        sample = Path(tmp) / "sample.jsonl"
        write_log(sample, rows // 10, tasks=20_000)
        began = time.perf_counter()
        read_token_log(sample)  # how restore used to read: every row validated as a TokenLogRow
        validating = (time.perf_counter() - began) * 10
        del restored
        tracemalloc.start()
        restored = restore(log)
        kept, peak = (m / 1e6 for m in tracemalloc.get_traced_memory())
        tracemalloc.stop()
    best, base = min(times), min(floors)
    print(f"restore {restored.rows:,} rows ({size_mb:.0f} MB, {len(restored.tasks):,} task scopes): "
          f"{best:.2f} s (median {sorted(times)[1]:.2f} s; CPU {min(cpu):.2f} s), target <= 3 s")
    print(f"baseline (chunked read + split each row, same file, same process): {base:.2f} s -> "
          f"restore is {best / base:.2f}x the baseline")
    print(f"the validating reader restore used before (read_token_log, on a tenth of the rows): "
          f"{validating:.1f} s per {rows:,} rows ({validating / best:.0f}x slower)")
    print(f"memory: {peak:.0f} MB peak allocated while restoring; process max RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB; state kept: {kept:.1f} MB "
          f"({kept * 1e6 / len(restored.tasks):.0f} bytes per task scope, placement included)")
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
