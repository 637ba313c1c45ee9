"""Container start to agent start for the QEMU stand-in (scripts/qemu-guest), next to the test desktop's.

Runs the real run_task pipeline (codex, scripted policy, real gateway) once on each guest kind and prints the
preparation phases (boot, isolate, upload, setup, probe) and the wall time to agent start side by side, with the
ratio QEMU/test desktop. The runner is `hcu-qemu-guest:tcg` (emulated: this machine's /dev/kvm cannot run a stock
kernel), so the ratio measures emulation as much as the VM. Run standalone: `python bench/bench_qemu_run_task_prep.py`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from bench_run_task_prep import PREP, one_attempt, preparation_sec

from hcu import REPO_ROOT

QEMU_FLAGS = ("--guest-image", str(REPO_ROOT / "build" / "qemu-guest" / "test-desktop.qcow2"),
              "--guest-docker-image", "hcu-qemu-guest:tcg", "--ram-size", "2G")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        desktop = one_attempt(work, 0)
        qemu = one_attempt(work, 1, QEMU_FLAGS)
    seconds = {kind: {p.name: p.duration_sec for p in result.phases if p.name in PREP}
               for kind, result in (("desktop", desktop), ("qemu", qemu))}
    print("run_task preparation, container start to agent start (codex, seconds)")
    print(f"{'phase':<10}{'test desktop':>14}{'QEMU guest':>12}")
    for name in PREP:
        print(f"{name:<10}{seconds['desktop'][name]:>14.2f}{seconds['qemu'][name]:>12.2f}")
    total = {"desktop": preparation_sec(desktop), "qemu": preparation_sec(qemu)}
    print(f"{'wall':<10}{total['desktop']:>14.2f}{total['qemu']:>12.2f}   QEMU / test desktop = "
          f"{total['qemu'] / total['desktop']:.1f}x")
    print(f"scores: test desktop {desktop.score}, QEMU {qemu.score}")


if __name__ == "__main__":
    main()
