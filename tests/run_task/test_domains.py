"""One real OSWorld task per application domain, end to end: the test desktop's application started by the task's
own setup, the real Codex CLI driving it through computer-use (keys, typing, clicks), the task's postconfig and
OSWorld's own evaluator scoring the result 1.0. Only the model is scripted (configs/demo-policies.json).

The tasks' files come from `--asset-stand-ins` (no internet here), so their checks must not depend on a downloaded
expected file: each check reads what the application wrote (a setting, a file saved by LibreOffice, a folder made
by Thunderbird) against a rule. The calc task's rule is a fixed number (E3 = 191.6667, what the task's real
workbook gives); the stand-in workbook lacks that data, so its policy enters the number itself, and Calc saves it.
The untouched state of these same tasks scores 0 in tests/canary/test_sweep.py (the sweep's canaries: setup,
postconfig and the evaluator, no agent): that is the do-nothing baseline, without a second agent run.

The seven attempts run three at a time behind one scripted stack (one gateway, one budget per task scope).
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hcu import REPO_ROOT
from hcu.demo.stand_in import scripted_stack
from hcu.osworld.attempt.meta import AttemptMeta
from hcu.osworld.records.result import TaskResult
from hcu.record_io import read_record
from tests.official_tasks import OFFICIAL_TASKS
from tests.session import TEST_DESKTOP_IMAGE, unique_run_id

pytestmark = [pytest.mark.docker, pytest.mark.artifacts, pytest.mark.osworld]

DOMAIN_TASKS = {
    "chrome": "af630914-714e-4a24-a7bb-f9af687d3b91",  # font size "Very large": Chrome's Preferences
    "libreoffice_calc": "357ef137-7eeb-4c80-a3bb-0951f26a8aff",  # E3 entered in Calc, saved as xlsx
    "libreoffice_writer": "3ef2b351-8a84-4ff2-8724-d86eae9b842e",  # first paragraph centered, saved as docx
    "libreoffice_impress": "ce88f674-ab7a-43da-9201-468d38539e4a",  # slides portrait, saved as pptx
    "gimp": "d52d6308-ec58-42b7-a2c9-de80e4837b2b",  # docks hidden: GIMP's sessionrc after ctrl+q
    "vlc": "a5bbbcd5-b398-4c91-83d4-55e1e31bbb81",  # minimal view saved in vlcrc from VLC's preferences
    "thunderbird": "a10b69e1-6034-4a2b-93e1-571d45194f75",  # two Local Folders made in Thunderbird
}
PARALLEL = 3
RUN_TIMEOUT = 900


class Attempt:
    def __init__(self, result: TaskResult, result_dir: Path, log: str) -> None:
        self.result, self.result_dir, self.log = result, result_dir, log

    def meta(self) -> AttemptMeta:
        return read_record(self.result_dir / "meta.json", AttemptMeta)


@pytest.fixture(scope="module")
def attempts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Attempt]:
    out = tmp_path_factory.mktemp("domains")
    token_log, key_file = out / "gateway-tokens.jsonl", out / "gateway-scope.key"
    with scripted_stack("codex", REPO_ROOT / "configs" / "demo-policies.json", token_log=token_log,
                        max_model_calls=40, log_dir=out / "logs", scope_key_file=key_file) as stack:
        def run(domain: str) -> Attempt:
            result_dir = out / domain
            proc = subprocess.run(
                [sys.executable, "-m", "hcu.osworld.run_task", "--task-id", DOMAIN_TASKS[domain],
                 "--task-domain", domain, "--tasks-dir", str(OFFICIAL_TASKS), "--test-desktop", TEST_DESKTOP_IMAGE,
                 "--agent", "codex", "--max-model-calls", "40", "--token-log", str(token_log),
                 "--gateway", stack.gateway_url, "--scope-key-file", str(key_file), "--result-dir", str(result_dir),
                 "--run-id", unique_run_id(f"domains-{domain.replace('_', '-')}"), "--timeout-seconds", "600",
                 "--no-progress-seconds", "180", "--asset-stand-ins", "--asset-cache", str(out / "stand-ins"),
                 "--keep-final-desktop", "none"],
                capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=REPO_ROOT)
            log = proc.stdout + proc.stderr
            assert (result_dir / "result.json").is_file(), log[-3000:]
            return Attempt(read_record(result_dir / "result.json", TaskResult), result_dir, log)

        with ThreadPoolExecutor(PARALLEL) as pool:
            return dict(zip(DOMAIN_TASKS, pool.map(run, DOMAIN_TASKS), strict=True))


@pytest.mark.timeout(3 * RUN_TIMEOUT)
@pytest.mark.parametrize("domain", list(DOMAIN_TASKS))
def test_the_scripted_model_solves_a_real_task_of_the_domain(attempts: dict[str, Attempt], domain: str) -> None:
    attempt = attempts[domain]
    r = attempt.result
    assert (r.status, r.score, r.evaluator_score, r.protocol_word) == ("completed", 1.0, 1.0, "TASK_COMPLETE"), (
        f"{r.failure_classification}: {r.failure_message}\n{attempt.log[-2000:]}")
    assert r.task_domain == domain and r.getters_read_nothing == []
    assert r.stand_ins, "made with stand-in task files: result.json says so"
    steps = attempt.meta().setup_steps
    assert all(step.ok for step in steps)
    checked = [check for step in steps for check in step.checks]
    assert checked, "the agent started only once the task's application was there"
    assert all(answer.ok for step in steps for answer in step.guest_answers)
