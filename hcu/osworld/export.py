"""`python -m hcu.osworld.export RUN_DIR --format osworld|harbor --out DIR`: a run in another tool's layout.

- `osworld`: OSWorld's own result folders (hcu/osworld/evidence/osworld_export.py), for show_result.py, OSWorld's
  monitor and the OSWorld-Verified archive;
- `harbor`: a Harbor job (hcu/osworld/evidence/harbor_export.py) under DIR, for `harbor view DIR`.

DIR must be new, empty or an earlier export in the same format (which it replaces)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from hcu.flags import OneLineParser, Settings, add_flags, describe_error, flag_name
from hcu.osworld.evidence.export_folder import ExportRefused
from hcu.osworld.evidence.harbor_export import export_harbor_job
from hcu.osworld.evidence.osworld_export import export_run
from hcu.osworld.settings import SAFE_NAME


class ExportOptions(Settings):
    format: Literal["osworld", "harbor"]
    """The layout to write: OSWorld's result folders, or a Harbor job folder."""
    out: Path
    """Where to write it (created; an earlier export in the same format there is replaced)."""
    action_space: str = Field(default="computer_use", pattern=SAFE_NAME)
    """osworld: the first folder level of OSWorld's layout (its runner's --action_space)."""
    observation_type: str = Field(default="mcp", pattern=SAFE_NAME)
    """osworld: the second level (its runner's --observation_type)."""
    model: str | None = Field(default=None, pattern=SAFE_NAME)
    """osworld: the third level; default each result's model."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m hcu.osworld.export", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="an hcu run directory (holding tasks/)")
    add_flags(parser, ExportOptions)
    values = vars(parser.parse_args(argv))
    run_dir = values.pop("run_dir")
    try:
        options = ExportOptions.model_validate({k: v for k, v in values.items() if v is not None})
    except ValidationError as exc:
        parser.error(describe_error(exc, flag_name))
    if not (run_dir / "tasks").is_dir():
        parser.error(f"run_dir: {run_dir} holds no tasks/ folder (expected an hcu run directory)")
    try:
        if options.format == "harbor":
            job = export_harbor_job(run_dir, options.out)
            print(f"exported {len(job.trials)} attempts to {job.job_dir} as a Harbor job ({job.withheld} withheld: "
                  f"errored trials without a reward); open it with: harbor view {options.out}")
            return 0
        exported = export_run(run_dir, options.out, action_space=options.action_space,
                              observation_type=options.observation_type, model=options.model)
    except ExportRefused as exc:
        parser.error(str(exc))
    withheld = sum(task.score is None for task in exported)
    print(f"exported {len(exported)} attempts to {options.out} ({withheld} withheld, marked, not scored)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
