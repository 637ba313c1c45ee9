"""Locate OSWorld's `desktop_env` and import only the parts a task needs.

Production runs use the OSWorld checkout that the runner's interpreter has (`desktop_env` importable) or
`OSWORLD_V2_ROOT`; this repository's tests use PyPI `desktop-env` installed without its dependencies.

`desktop_env.evaluators.metrics` and `.getters` re-export every function from their package `__init__`,
which imports every submodule, and `metrics/docs.py` pulls easyocr and torch. We register both packages as
lazy modules instead: a name is looked up by scanning the submodules' source with `ast`, and only the
submodule that defines it is imported. Nothing here imports `desktop_env` at module import time.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import importlib
import importlib.util
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import requests

from hcu.osworld.errors import PhaseError

OSWORLD_ROOT_ENV = "OSWORLD_V2_ROOT"
REQUIRED_FILES = (
    "controllers/setup.py",
    "evaluators/getters/__init__.py",
    "evaluators/metrics/__init__.py",
    "evaluators/metrics/utils.py",
)
"""Files a usable `desktop_env` has; a checkout without them is too old (or not OSWorld at all)."""

INSTALL_HINT = (
    "install an OSWorld checkout into this interpreter (pip install -e external/OSWorld-V2) "
    f"or set {OSWORLD_ROOT_ENV} to the checkout"
)

T = TypeVar("T")
_LAZY_PACKAGES = ("desktop_env.evaluators.getters", "desktop_env.evaluators.metrics")
_lock = threading.RLock()


class OSWorldCodeError(PhaseError):
    """The OSWorld code is missing, too old, or lacks a getter/metric a task names."""


@cache
def desktop_env_dir() -> Path:
    """The `desktop_env` package directory: `$OSWORLD_V2_ROOT/desktop_env` when set, else the one this
    interpreter imports."""
    root = os.environ.get(OSWORLD_ROOT_ENV)
    if root:
        package = Path(root).expanduser().resolve() / "desktop_env"
        if not (package / "__init__.py").is_file():
            raise OSWorldCodeError(f"{OSWORLD_ROOT_ENV}={root} has no desktop_env package; {INSTALL_HINT}")
        loaded = sys.modules.get("desktop_env")
        if loaded is not None and Path(loaded.__file__ or "").resolve().parent != package:
            raise OSWorldCodeError(
                f"desktop_env is already imported from {loaded.__file__}, not from {OSWORLD_ROOT_ENV}={root}"
            )
        if str(package.parent) not in sys.path:
            sys.path.insert(0, str(package.parent))
    else:
        spec = importlib.util.find_spec("desktop_env")
        if spec is None or not spec.submodule_search_locations:
            raise OSWorldCodeError(f"OSWorld's desktop_env is not importable; {INSTALL_HINT}")
        package = Path(next(iter(spec.submodule_search_locations))).resolve()
    missing = [f for f in REQUIRED_FILES if not (package / f).is_file()]
    if missing:
        listed = ", ".join(missing)
        raise OSWorldCodeError(f"desktop_env at {package} is too old (missing {listed}); {INSTALL_HINT}")
    return package


def checkout_root() -> Path:
    """The directory holding `desktop_env` (a checkout's root, or site-packages for a wheel)."""
    return desktop_env_dir().parent


def _defining_submodules(package_dir: Path) -> dict[str, str]:
    """Map each public name to the submodule that defines it, from the package `__init__`'s re-exports
    (`from .x import a as b`) and, for names it does not re-export, the submodules' top-level defs."""
    names: dict[str, str] = {}
    for source in sorted(package_dir.glob("*.py")):
        if source.name == "__init__.py":
            continue
        tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.setdefault(node.name, source.stem)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        names.setdefault(target.id, source.stem)
    init = ast.parse((package_dir / "__init__.py").read_text(encoding="utf-8"))
    for node in init.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = node.module
    return names


class _LazyPackage(types.ModuleType):
    """A package module whose attributes are imported from their defining submodule on first use."""

    def __init__(self, name: str, package_dir: Path) -> None:
        super().__init__(name)
        self.__path__ = [str(package_dir)]
        self.__file__ = str(package_dir / "__init__.py")
        self.__package__ = name
        self.__spec__ = importlib.util.spec_from_file_location(
            name, package_dir / "__init__.py", submodule_search_locations=[str(package_dir)]
        )
        self._hcu_index = _defining_submodules(package_dir)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        submodule = self._hcu_index.get(attr)
        if submodule is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
        value = getattr(_bounded(importlib.import_module(f"{self.__name__}.{submodule}")), attr)
        setattr(self, attr, value)
        return value


DEFAULT_CONNECT_TIMEOUT_SEC = 10.0
DEFAULT_READ_TIMEOUT_SEC = 130.0
"""Longer than the guest's 120 s command timeout, so a slow `/execute` still answers."""


class _BoundedRequests(types.ModuleType):
    """Stands in for `requests` inside OSWorld modules: the same API, but a call without `timeout`
    gets one (most of OSWorld's controller and setup calls have none, so a dead guest hangs them)."""

    def __init__(self) -> None:
        super().__init__("requests")

    def __getattr__(self, attr: str) -> Any:
        return getattr(requests, attr)

    def request(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        guest_host = _offline_guest_host.get()
        if guest_host is not None and urlsplit(url).hostname != guest_host:
            raise requests.ConnectionError(f"offline_assets forbids fetching {url}")
        kwargs.setdefault("timeout", (DEFAULT_CONNECT_TIMEOUT_SEC, DEFAULT_READ_TIMEOUT_SEC))
        return requests.request(method, url, **kwargs)

    def get(self, url: str, **kwargs: Any) -> requests.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> requests.Response:
        return self.request("POST", url, **kwargs)

    def put(self, url: str, **kwargs: Any) -> requests.Response:
        return self.request("PUT", url, **kwargs)

    def delete(self, url: str, **kwargs: Any) -> requests.Response:
        return self.request("DELETE", url, **kwargs)

    def head(self, url: str, **kwargs: Any) -> requests.Response:
        return self.request("HEAD", url, **kwargs)


_BOUNDED_REQUESTS = _BoundedRequests()
_offline_guest_host: contextvars.ContextVar[str | None] = contextvars.ContextVar("hcu_offline", default=None)


@contextlib.contextmanager
def offline(guest_host: str | None) -> Iterator[None]:
    """While active (in this context and `call_with_deadline` workers started from it), OSWorld's HTTP calls
    may reach only `guest_host`: any other fetch (a download the asset cache did not cover, a browse-history
    database, a Drive file) fails instead of going out. `None` leaves calls unrestricted."""
    token = _offline_guest_host.set(guest_host)
    try:
        yield
    finally:
        _offline_guest_host.reset(token)


def _bounded(mod: types.ModuleType) -> types.ModuleType:
    """Give every imported desktop_env module the timeout-bounded `requests`."""
    for loaded_name, loaded in list(sys.modules.items()):
        if loaded_name.startswith("desktop_env.") and getattr(loaded, "requests", None) is requests:
            loaded.requests = _BOUNDED_REQUESTS
    return mod


def call_with_deadline(fn: Callable[[], T], deadline_sec: float, what: str) -> T:
    """Run `fn` in a worker thread and give up after `deadline_sec` (OSWorld's calls cannot be cancelled;
    every HTTP call in them is bounded by `_BoundedRequests`, so an abandoned thread ends on its own)."""
    outcome: dict[str, Any] = {}
    context = contextvars.copy_context()

    def target() -> None:
        try:
            outcome["value"] = context.run(fn)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=target, name=f"osworld: {what}", daemon=True)
    worker.start()
    worker.join(deadline_sec)
    if worker.is_alive():
        raise TimeoutError(f"{what} exceeded its {deadline_sec:g} s deadline")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@contextlib.contextmanager
def _no_dotenv() -> Iterator[None]:
    """`controllers/setup.py` calls `dotenv.load_dotenv()` at import, which would pull a `.env` found above
    the package (possibly holding credentials) into this process's environment: make that call a no-op."""
    try:
        import dotenv
    except ImportError:
        yield
        return
    original = dotenv.load_dotenv
    dotenv.load_dotenv = lambda *args, **kwargs: False
    try:
        yield
    finally:
        dotenv.load_dotenv = original


def _ensure_lazy_packages() -> None:
    package_dir = desktop_env_dir()
    with _lock:
        importlib.import_module("desktop_env.evaluators")
        for name in _LAZY_PACKAGES:
            existing = sys.modules.get(name)
            if existing is not None:
                continue
            module = _LazyPackage(name, package_dir / Path(*name.split(".")[1:]))
            sys.modules[name] = module
            setattr(sys.modules["desktop_env.evaluators"], name.rsplit(".", 1)[1], module)


def _lookup(package: str, name: str, what: str) -> Callable[..., Any]:
    _ensure_lazy_packages()
    module = sys.modules[package]
    try:
        with _lock:
            return getattr(module, name)
    except AttributeError:
        raise OSWorldCodeError(
            f"{what} {name!r} is not in desktop_env at {desktop_env_dir()} (too old a checkout?)"
        ) from None
    except ImportError as exc:
        raise OSWorldCodeError(
            f"{what} {name!r} needs a module this interpreter lacks: {exc}; "
            "pip install -r requirements-osworld.txt or use the checkout's venv"
        ) from None


def getter(result_type: str) -> Callable[..., Any]:
    """OSWorld's `get_<result_type>(env, config)`."""
    return _lookup("desktop_env.evaluators.getters", f"get_{result_type}", "getter")


def metric(name: str) -> Callable[..., Any]:
    """OSWorld's metric function `name(result, expected?, **options)`."""
    return _lookup("desktop_env.evaluators.metrics", name, "metric")


def module(name: str) -> types.ModuleType:
    """Import a `desktop_env` module (e.g. `controllers.setup`) with the evaluator packages kept lazy."""
    _ensure_lazy_packages()
    with _lock, _no_dotenv():
        try:
            return _bounded(importlib.import_module(f"desktop_env.{name}"))
        except ImportError as exc:
            raise OSWorldCodeError(
                f"desktop_env.{name} needs a module this interpreter lacks: {exc}; "
                "pip install -r requirements-osworld.txt or use the checkout's venv"
            ) from None
