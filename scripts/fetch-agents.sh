#!/usr/bin/env bash
# Fill ARTIFACT_DIR with every registered agent CLI's files, from npm and PyPI only (no vendor install scripts
# run). What to fetch is each adapter's own declaration (hcu/osworld/agents/<cli>.py: package, version, the file
# taken out of it); `python -m hcu.osworld.agents.fetch` does the fetching: skip-if-current and idempotent, every
# file lands by atomic rename, agents.json records version + sha256, every download is bounded.
# Needs npm and the venv (make host setup); pip comes from the venv's Python (HCU_VENV_PYTHON).
set -euo pipefail

if [[ $# -ne 1 || -z "$1" ]]; then
  echo "usage: fetch-agents.sh ARTIFACT_DIR" >&2
  exit 2
fi

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${HCU_VENV_PYTHON:-$ROOT/.venv/bin/python}
[[ -x "$PY" ]] || { echo "fetch-agents: $PY missing (run make setup)" >&2; exit 2; }
command -v npm >/dev/null || { echo "fetch-agents: npm missing (run make host)" >&2; exit 2; }
mkdir -p "$1"
ART=$(cd "$1" && pwd)
# From the checkout's root, so this checkout's hcu is the one that runs.
cd "$ROOT"
exec "$PY" -m hcu.osworld.agents.fetch "$ART"
