"""The gateway's exceptions have one root: every public exception class of every hcu.gateway module derives from
GatewayProxyError, and the ones that describe bad input are still ValueErrors for the callers that catch those."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import hcu.gateway
from hcu.gateway.errors import GatewayProxyError
from hcu.gateway.pool import UpstreamSpecError, parse_upstreams
from hcu.gateway.scope_secret import ScopeKeyError


def public_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class a hcu.gateway module defines under a public name."""
    found = {}
    for info in pkgutil.walk_packages(hcu.gateway.__path__, "hcu.gateway."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (inspect.isclass(value) and issubclass(value, BaseException) and not name.startswith("_")
                    and value.__module__ == module.__name__):
                found[f"{module.__name__}.{name}"] = value
    return found


def test_every_public_gateway_exception_derives_from_the_root() -> None:
    found = public_exceptions()
    assert "hcu.gateway.refusal.Refused" in found and "hcu.gateway.credentials.CredentialError" in found
    strays = sorted(name for name, cls in found.items() if not issubclass(cls, GatewayProxyError))
    assert not strays, f"not under GatewayProxyError: {strays}"


def test_the_roots_docstring_names_every_class_of_the_tree() -> None:
    doc = GatewayProxyError.__doc__ or ""
    missing = sorted(name for name, cls in public_exceptions().items()
                     if cls is not GatewayProxyError and cls.__name__ not in doc)
    assert not missing, f"GatewayProxyError's docstring does not show {missing}"


@pytest.mark.parametrize("error", [UpstreamSpecError, ScopeKeyError])
def test_bad_input_errors_are_still_value_errors(error: type[Exception]) -> None:
    assert issubclass(error, ValueError) and issubclass(error, GatewayProxyError)


def test_a_bad_upstream_is_caught_by_either_name() -> None:
    for caught in (ValueError, GatewayProxyError):
        with pytest.raises(caught, match="--upstreams"):
            parse_upstreams("bad host!")
