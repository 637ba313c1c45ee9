"""Regenerate docs/images/viewer-charts.png: the run page's charts as the viewer draws them, for docs/viewer.md.

Builds a synthetic run (the viewer tests' sample-run writer: 40 tasks over the OSWorld domains, 3 repeats, mixed
outcomes and lengths) with a do-nothing baseline from a sweep.json written through the sweep's own model, exports
it with `python -m hcu.osworld.view --export`, opens the export in Debian's headless Chromium and saves the charts
section, downscaled and reduced to a palette so the file stays small. The figures are made up; the drawing is
hcu's.

    .venv/bin/python scripts/viewer_screenshot.py [OUT_PNG]
"""

from __future__ import annotations

import io
import random
import sys
import tempfile
from pathlib import Path

from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the run builder and the browser live in tests/view

from hcu import REPO_ROOT  # noqa: E402
from hcu.osworld.records.sweep_file import SWEEP_FILE, SweepFile, SweepTask  # noqa: E402
from hcu.osworld.summary.run_summary import summarize  # noqa: E402
from hcu.osworld.view.data import RunData  # noqa: E402
from hcu.osworld.view.export import export  # noqa: E402
from hcu.osworld.view.site import Site  # noqa: E402
from hcu.record_io import write_json  # noqa: E402
from tests.view.browser import chromium, wait_for  # noqa: E402
from tests.view.sample_run import DOMAINS, Attempt, Outcome, build_run  # noqa: E402

OUT = REPO_ROOT / "docs" / "images" / "viewer-charts.png"
TASKS, REPEATS, SEED = 40, 3, 20261202
WIDTH = 1100
"""Pixels of the saved image's width (the page is drawn at 1400 and scaled down)."""


def attempts(rng: random.Random) -> list[Attempt]:
    """Each task has a difficulty; its repeats pass with that chance, a few end otherwise."""
    out = []
    for index in range(TASKS):
        task, ease = f"task-{index:02d}", rng.random()
        for repeat in range(1, REPEATS + 1):
            roll = rng.random()
            outcome: Outcome = ("no_result" if roll < 0.02 else "evaluator_error" if roll < 0.05 else
                                "timeout" if roll < 0.09 else "partial" if roll < 0.14 else
                                "pass" if rng.random() < ease else "fail")
            out.append(Attempt(task, outcome, repeat=repeat, steps=int(4 + 26 * (1 - ease) * rng.random() + 2)))
    return out


def sweep_of(root: Path, task_ids: list[str], domains: dict[str, str], rng: random.Random) -> Path:
    """A sweep.json in which a few tasks pass untouched and one was never evaluated."""
    rows = [SweepTask(task_id=task, domain=domains[task], outcome="passed", status="passed", evaluated=True,
                      feasible=True, score=1.0 if rng.random() < 0.1 else 0.0) for task in task_ids[1:]]
    folder = root / "sweep"
    write_json(folder / SWEEP_FILE, SweepFile(run_id="sweep-demo", settings={"test_desktop": True},
                                              tasks=rows).model_dump(mode="json"))
    return folder


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else OUT
    rng = random.Random(SEED)
    with tempfile.TemporaryDirectory(prefix="hcu-viewer-shot-") as tmp:
        root = Path(tmp)
        planned = attempts(rng)
        task_ids = list(dict.fromkeys(a.task_id for a in planned))
        domains = {task: DOMAINS[i % len(DOMAINS)] for i, task in enumerate(task_ids)}
        sample = build_run(root, "charts-demo", planned, light_screens=True, domains=domains)
        summarize(sample.run_dir, baseline_dir=sweep_of(root, task_ids, domains, rng))
        site = root / "site"
        export(Site(RunData(sample.run_dir)), site)
        for driver in chromium(root / "profile"):
            driver.set_window_size(1400, 1400)
            driver.get((site / "index.html").as_uri())
            section = wait_for(driver, lambda d: d.find_element("css selector", "#charts"), "the charts").find_element(
                "xpath", "..")
            driver.execute_script("document.querySelector('header.top').style.position = 'static';"
                                  "arguments[0].scrollIntoView()", section)  # the sticky bar would cover its top
            shot = Image.open(io.BytesIO(section.screenshot_as_png)).convert("RGB")
    scaled = shot.resize((WIDTH, round(shot.height * WIDTH / shot.width)), Image.LANCZOS)
    out.parent.mkdir(parents=True, exist_ok=True)
    scaled.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)
    print(f"{out}: {scaled.width}x{scaled.height}, {out.stat().st_size / 1024:.0f} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
