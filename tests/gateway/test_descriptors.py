"""The provider descriptors are what the gateway modules themselves use: the same name, the same credential and
endpoint variables, and flags and variables that point a gateway at an upstream it then accepts."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from hcu import REPO_ROOT
from hcu.gateway.cli import Shell
from hcu.gateway.descriptors import OPENAI, PROVIDERS, ProviderDescriptor
from hcu.gateway.options import OpenAIOptions
from hcu.gateway.provider import Provider

DESCRIPTORS = list(PROVIDERS.values())


def provider_class(descriptor: ProviderDescriptor) -> type[Provider]:
    module = importlib.import_module(descriptor.module)
    (found,) = {value for value in vars(module).values()
                if isinstance(value, type) and issubclass(value, Provider) and value is not Provider}
    return found


@pytest.mark.parametrize("descriptor", DESCRIPTORS, ids=lambda d: d.name)
def test_the_gateway_module_is_the_descriptor_s(descriptor: ProviderDescriptor) -> None:
    assert provider_class(descriptor).name == descriptor.name
    assert descriptor.token_env in descriptor.credential_env and descriptor.sdk_key_env in descriptor.credential_env


@pytest.mark.parametrize("descriptor", DESCRIPTORS, ids=lambda d: d.name)
def test_the_gateway_asks_for_the_descriptor_s_credential_variable(descriptor: ProviderDescriptor) -> None:
    """Started with everything but its credential, the gateway names the variable the descriptor gives."""
    flags, env = descriptor.upstream_at("http://127.0.0.1:9", "unused")
    env.pop(descriptor.token_env)
    argv = [sys.executable, "-m", descriptor.module, "--host", "127.0.0.1", descriptor.port_flag, "9", "--out",
            "/nonexistent/tokens.jsonl", "--max-requests-per-task", "1", *flags]
    out = subprocess.run(argv, cwd=REPO_ROOT, env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert f"{descriptor.token_env}: environment variable is missing or empty" in out.stderr


def test_an_upstream_is_a_base_variable_or_the_openai_gateway_s_flags() -> None:
    flags, env = PROVIDERS["anthropic"].upstream_at("http://127.0.0.1:9", "t")
    assert flags == [] and env == {"OSW_ANTHROPIC_UPSTREAM_BASE": "http://127.0.0.1:9",
                                   "OSW_ANTHROPIC_UPSTREAM_TOKEN": "t"}
    flags, env = OPENAI.upstream_at("http://127.0.0.1:9", "t")
    options = Shell(OPENAI.module, OpenAIOptions).parse(["--host", "h", "--ports", "1", "--out", "o",
                                                        "--max-requests-per-task", "1", *flags])
    assert (options.upstreams, options.upstream_kind, options.upstream_scheme) == ("127.0.0.1:9", "openai", "http")
    assert env == {"OSW_OPENAI_UPSTREAM_TOKEN": "t"}
