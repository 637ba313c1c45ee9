"""`python -m hcu.osworld.export RUN_DIR --format osworld --out DIR`: a run in OSWorld's own result layout
(hcu/osworld/evidence/osworld_export.py), for show_result.py, OSWorld's monitor and the OSWorld-Verified archive."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from hcu.flags import OneLineParser, Settings, add_flags, describe_error, flag_name
from hcu.osworld.evidence.osworld_export import export_run
from hcu.osworld.settings import SAFE_NAME


class ExportOptions(Settings):
    format: Literal["osworld"]
    """The layout to write (OSWorld's result folders)."""
    out: Path
    """Where to write it (created)."""
    action_space: str = Field(default="computer_use", pattern=SAFE_NAME)
    """The first folder level of OSWorld's layout (its runner's --action_space)."""
    observation_type: str = Field(default="mcp", pattern=SAFE_NAME)
    """The second level (its runner's --observation_type)."""
    model: str | None = Field(default=None, pattern=SAFE_NAME)
    """The third level; default each result's model."""


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
    exported = export_run(run_dir, options.out, action_space=options.action_space,
                          observation_type=options.observation_type, model=options.model)
    withheld = sum(task.score is None for task in exported)
    print(f"exported {len(exported)} attempts to {options.out} ({withheld} withheld, marked, not scored)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
