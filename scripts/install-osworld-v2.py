#!/usr/bin/env python3
"""Install hcu's overlay into an OSWorld checkout:  python3 scripts/install-osworld-v2.py CHECKOUT

The overlay makes the checkout's own code (1) fill setup downloads and `cloud_file` getters from hcu's asset
cache (`hcu.osworld.osworld_bridge.checkout_overlay.prefill_download`) and (2) retry Chrome's
`connect_over_cdp` with bounded backoff instead of launching a second browser. It adds `desktop_env/hcu_overlay.py`
(which falls back to upstream behaviour when hcu is not importable) and a few one-line edits, each found by
an exact anchor in the upstream source.

- Idempotent: a second run changes nothing. Re-run it whenever the checkout is replaced.
- Refuses (exit 2, nothing written) a checkout whose files it does not recognise: a file whose anchors are
  missing or ambiguous, or that carries an hcu edit this installer has no record of (its manifest keeps the
  sha256 of every original and patched file, and a copy of each original, in `desktop_env/.hcu-overlay/`).

Standard library only, so any python3 can run it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

OVERLAY_VERSION = 1
MARKER = "# hcu-overlay"
STATE_DIR = Path("desktop_env") / ".hcu-overlay"
SHIM_PATH = Path("desktop_env") / "hcu_overlay.py"
SHIM = f'''"""Written by hcu's scripts/install-osworld-v2.py (overlay version {OVERLAY_VERSION}).
Re-run the installer instead of editing this file.

Forwards to hcu.osworld.osworld_bridge.checkout_overlay when hcu is importable; otherwise behaves as upstream OSWorld.
"""

try:
    from hcu.osworld.osworld_bridge.checkout_overlay import connect_over_cdp, prefill_download
except ImportError:

    def prefill_download(url, target):
        return None

    def connect_over_cdp(chromium, url):
        return chromium.connect_over_cdp(url)
'''


@dataclass(frozen=True)
class Edit:
    anchor: str
    replacement: str
    exactly_once: bool = True
    """False: every occurrence is replaced (at least one must exist)."""


IMPORT = Edit("\nimport requests\n", f"\nimport requests\nfrom desktop_env import hcu_overlay  {MARKER}\n")
CDP = Edit(
    "p.chromium.connect_over_cdp(remote_debugging_url)",
    "hcu_overlay.connect_over_cdp(p.chromium, remote_debugging_url)",
    exactly_once=False,
)
DOWNLOAD_CHECKED = (
    "\n            if not url or not path:\n"
    '                raise Exception(f"Setup Download - Invalid URL ({url}) or path ({path}).")\n'
)
HISTORY_URL_END = 'history_empty.sqlite?download=true"\n'
EDITS: dict[str, list[Edit]] = {
    "desktop_env/controllers/setup.py": [
        IMPORT,
        Edit(  # `_download_setup`: right after it validated url and path, before its own cache check
            DOWNLOAD_CHECKED,
            f"{DOWNLOAD_CHECKED}            hcu_overlay.prefill_download(url, cache_path)  {MARKER}\n",
        ),
        Edit(  # `_update_browse_history_setup`: its fixed Hugging Face database
            HISTORY_URL_END,
            f"{HISTORY_URL_END}        hcu_overlay.prefill_download(db_url, cache_path)  {MARKER}\n",
        ),
        CDP,
    ],
    "desktop_env/evaluators/getters/file.py": [
        IMPORT,
        Edit(
            "\n        if os.path.exists(_path):\n",
            f"\n        hcu_overlay.prefill_download(p, _path)  {MARKER}"
            "\n        if os.path.exists(_path):\n",
        ),
    ],
    "desktop_env/evaluators/getters/chrome.py": [IMPORT, CDP],
}


class Unrecognised(Exception):
    pass


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def apply_edits(rel: str, text: str) -> str:
    for edit in EDITS[rel]:
        count = text.count(edit.anchor)
        if count == 0 or (edit.exactly_once and count != 1):
            wanted = "once" if edit.exactly_once else "at least once"
            first_line = edit.anchor.strip().splitlines()[0]
            raise Unrecognised(f"{rel}: expected {first_line!r} {wanted}, found it {count} times")
        text = text.replace(edit.anchor, edit.replacement)
    return text


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def plan(checkout: Path) -> tuple[dict[str, tuple[str, str]], dict]:
    """{file: (original text, patched text)} and the previous manifest; raises Unrecognised."""
    manifest_path = checkout / STATE_DIR / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {"files": {}}
    result: dict[str, tuple[str, str]] = {}
    for rel in EDITS:
        path = checkout / rel
        if not path.is_file():
            raise Unrecognised(f"{rel} is missing: not an OSWorld checkout, or too old a one")
        text = path.read_text(encoding="utf-8")
        known = manifest["files"].get(rel, {})
        if known and sha256(text) == known.get("patched_sha256"):
            original = (checkout / STATE_DIR / "originals" / rel).read_text(encoding="utf-8")
            if sha256(original) != known.get("original_sha256"):
                raise Unrecognised(f"{STATE_DIR}/originals/{rel} does not match the manifest")
        elif MARKER in text:
            raise Unrecognised(f"{rel} carries hcu overlay edits this installer has no record of")
        else:
            original = text
        result[rel] = (original, apply_edits(rel, original))
    return result, manifest


def install(checkout: Path) -> list[str]:
    """Install or refresh the overlay; returns the files it changed (empty when already installed)."""
    if not (checkout / "desktop_env" / "__init__.py").is_file():
        raise Unrecognised(f"{checkout} has no desktop_env package: not an OSWorld checkout")
    files, _ = plan(checkout)  # every check before the first write
    changed: list[str] = []
    manifest = {"overlay_version": OVERLAY_VERSION, "files": {}}
    for rel, (original, patched) in files.items():
        path = checkout / rel
        if path.read_text(encoding="utf-8") != patched:
            write_atomic(checkout / STATE_DIR / "originals" / rel, original)
            write_atomic(path, patched)
            changed.append(rel)
        manifest["files"][rel] = {"original_sha256": sha256(original), "patched_sha256": sha256(patched)}
    shim = checkout / SHIM_PATH
    if not shim.is_file() or shim.read_text(encoding="utf-8") != SHIM:
        write_atomic(shim, SHIM)
        changed.append(str(SHIM_PATH))
    manifest_path = checkout / STATE_DIR / "manifest.json"
    manifest_text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    if not manifest_path.is_file() or manifest_path.read_text() != manifest_text:
        write_atomic(manifest_path, manifest_text)
    return changed


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python3 scripts/install-osworld-v2.py CHECKOUT", file=sys.stderr)
        return 2
    checkout = Path(argv[0])
    try:
        changed = install(checkout)
    except Unrecognised as exc:
        print(f"install-osworld-v2: refusing {checkout}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"install-osworld-v2: {checkout}: {exc}", file=sys.stderr)
        return 2
    if changed:
        print(f"install-osworld-v2: overlay installed in {checkout} ({', '.join(changed)})")
    else:
        print(f"install-osworld-v2: overlay already installed in {checkout}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
