#!/usr/bin/env bash
# Build the computer-use artifact: ONE executable (a shiv zipapp) for the guest's system python3.10 and 3.11.
# Both ABIs' compiled wheels sit side by side in one site-packages (extension file names carry the ABI).
# Both wheel sets are downloaded by the venv's pip for the target interpreter (--python-version/--abi), so the
# build machine needs neither python3.10 nor pyenv. pip then evaluates environment markers against the running
# interpreter, not the target, so nothing is resolved here: the lock pins every wheel of the 3.10 closure
# (3.10-only ones too) and is installed with --no-deps; check_closure proves each set complete for its Python.
# Reproducible: pinned wheels from PyPI only, fixed zip timestamps, sorted entries. Skips when inputs are
# unchanged. Usage: scripts/build-computer-use.sh OUT   (env: HCU_VENV_PYTHON, default .venv/bin/python)
set -euo pipefail

OUT=${1:?usage: build-computer-use.sh OUT}
REPO=$(cd "$(dirname "$0")/.." && pwd)
LOCK="$REPO/hcu/computer_use/requirements.lock"
VENV_PY=${HCU_VENV_PYTHON:-$REPO/.venv/bin/python}
CACHE="$REPO/artifacts/.cache/computer-use-wheels"
PYTHONS=(3.10 3.11)
PLATFORMS=(--platform manylinux_2_35_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64
           --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
SHIV_VERSION=1.0.8
[[ -x "$VENV_PY" ]] || { echo "build-computer-use: $VENV_PY missing (run make setup)" >&2; exit 2; }
if [[ "$("$VENV_PY" -m shiv --version 2>/dev/null)" != *"$SHIV_VERSION"* ]]; then
  "$VENV_PY" -m pip install -q "shiv==$SHIV_VERSION"
fi

sources() { (cd "$REPO" && find hcu/__init__.py hcu/computer_use -name '*.py' -o -name '*.lock' | LC_ALL=C sort); }
inputs_hash() {
  (cd "$REPO" && { cat scripts/build-computer-use.sh; sources | xargs sha256sum;
                   "$VENV_PY" -m shiv --version; } | sha256sum | cut -d' ' -f1)
}
STAMP="$OUT.inputs"
WANT=$(inputs_hash)
if [[ -f "$OUT" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
  echo "computer-use is up to date: $OUT"
  sha256sum "$OUT"
  exit 0
fi

download() {  # $1 = 3.10|3.11: the pinned set for that CPython's ABI, from PyPI only (no local config or mirror)
  local abi=cp${1/./}
  mkdir -p "$CACHE/$abi"
  env -u PIP_FIND_LINKS -u PIP_CONSTRAINT -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL PIP_CONFIG_FILE=/dev/null \
    "$VENV_PY" -m pip download -q --timeout 60 --retries 3 --only-binary=:all: --no-deps \
    --python-version "$1" --implementation cp --abi "$abi" "${PLATFORMS[@]}" -r "$LOCK" -d "$CACHE/$abi"
}
for v in "${PYTHONS[@]}"; do download "$v"; done

STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/site/hcu/computer_use"
# Every pinned wheel of both sets, unpacked in a fixed order (pure wheels are identical in both). Each set must
# hold the whole lock and satisfy every requirement its Python's markers select; every compiled module must be
# there for both ABIs (abi3 modules serve both).
"$VENV_PY" - "$STAGE/site" "$LOCK" "$CACHE" "${PYTHONS[@]}" <<'PY'
import re, sys, zipfile
from collections import defaultdict
from email.parser import BytesParser
from pathlib import Path
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
site, lock, cache, pythons = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:]
lines = [line.split("#")[0].strip() for line in lock.read_text().splitlines() if not line.startswith("#")]
pins = {canonicalize_name(name): version for name, version in (line.split("==") for line in lines if line)}

def wheel_set(python: str) -> dict[str, Path]:
    found = {}
    for wheel in sorted((cache / f"cp{python.replace('.', '')}").glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        if pins.get(canonicalize_name(name)) == version:  # else an older download left in the cache
            found[canonicalize_name(name)] = wheel
    if missing := sorted(set(pins) - set(found)):
        sys.exit(f"build-computer-use: no cp{python} wheel for {', '.join(missing)}")
    return found

def check_closure(python: str, wheels: dict[str, Path]) -> None:
    env = {"python_version": python, "python_full_version": f"{python}.0", "implementation_name": "cpython",
           "platform_python_implementation": "CPython", "sys_platform": "linux", "platform_system": "Linux",
           "os_name": "posix", "platform_machine": "x86_64", "extra": ""}
    for name, wheel in wheels.items():
        with zipfile.ZipFile(wheel) as zf:
            meta = next(n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
            requires = BytesParser().parsebytes(zf.read(meta)).get_all("Requires-Dist") or []
        for req in map(Requirement, requires):
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            got = pins.get(canonicalize_name(req.name))
            if got is None or not req.specifier.contains(got, prereleases=True):
                pinned = f"{req.name}=={got}" if got else f"no {req.name}"
                sys.exit(f"build-computer-use: {name} needs {req} on python{python}; {lock.name} has {pinned}")

sets = {python: wheel_set(python) for python in pythons}
for python, wheels in sets.items():
    check_closure(python, wheels)
for wheel in sorted({w.name: w for ws in sets.values() for w in ws.values()}.values(), key=lambda w: w.name):
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
abis = defaultdict(set)  # module path -> the CPython ABIs it is built for
for so in site.rglob("*.cpython-3*-x86_64-linux-gnu.so"):
    module, abi = re.fullmatch(r"(.+)\.cpython-(3\d+)-x86_64-linux-gnu\.so", str(so.relative_to(site))).groups()
    abis[module].add(abi)
want = {p.replace(".", "") for p in pythons}
if lacking := sorted(f"{module} (cp{', cp'.join(sorted(want - got))})" for module, got in abis.items() if got != want):
    sys.exit(f"build-computer-use: compiled modules missing for an ABI: {'; '.join(lacking)}")
PY
cp "$REPO/hcu/__init__.py" "$STAGE/site/hcu/"
(cd "$REPO" && sources | grep '^hcu/computer_use/' | xargs -I{} cp {} "$STAGE/site/{}")
find "$STAGE/site" -name __pycache__ -prune -exec rm -rf {} +
find "$STAGE/site" -type d -exec chmod 755 {} + && find "$STAGE/site" -type f -exec chmod 644 {} +

mkdir -p "$(dirname "$OUT")"
# SHIV_ROOT (env) overrides where the compiled parts are unpacked; the default needs a writable HOME.
"$VENV_PY" -m shiv --site-packages "$STAGE/site" -e hcu.computer_use.__main__:main -o "$OUT.tmp" \
  -p '/usr/bin/env python3' --root '~/.cache/hcu-computer-use' --reproducible >/dev/null
chmod 755 "$OUT.tmp" && mv "$OUT.tmp" "$OUT"
echo "$WANT" > "$STAMP"
sha256sum "$OUT"
