"""A gateway's options as one model: the command line it builds parses back into the same options, and every flag
reaches the gateway's config."""

from __future__ import annotations

from pathlib import Path

import pytest

from hcu.gateway.cli import Shell
from hcu.gateway.descriptors import PROVIDERS
from hcu.gateway.options import GatewayConfig, GatewayOptions, OpenAIOptions, SinglePortOptions


def test_the_command_line_built_parses_back_into_the_options() -> None:
    options = OpenAIOptions(host="172.17.0.1", ports=[8611, 8612], out=Path("/runs/r/tokens.jsonl"),
                            max_requests_per_task=0, upstreams="r1.example@d1,r2.example", upstream_kind="openai",
                            scope_key_file=Path("/runs/r/gateway-scope.key"), flood_delay=0.5)
    argv = options.argv()
    assert Shell("openai", OpenAIOptions).parse(argv) == options
    assert "--header-timeout" not in argv  # a flag not given is left to the gateway's default


@pytest.mark.parametrize("provider", PROVIDERS.values(), ids=lambda p: p.name)
def test_a_gateway_command_names_the_provider_s_module_and_port_flag(provider) -> None:
    options = GatewayOptions(host="h", out=Path("o"), max_requests_per_task=7, scope_key_file=None)
    command = options.command(provider, 9000, ["--upstreams", "u"])
    assert command[1:] == ["-m", provider.module, "--host", "h", "--out", "o", "--max-requests-per-task", "7",
                           provider.port_flag, "9000", "--upstreams", "u"]


def test_every_flag_but_the_host_sets_the_config() -> None:
    values = {"host": "h", "port": 1, "out": Path("o"), "max_requests_per_task": 2, "rate_limit_max_wait": 3.0,
              "upstream_idle_timeout": 4.0, "header_timeout": 5.0, "max_connections_per_peer": 6,
              "refusal_interval": 7.0, "refusal_rows_per_interval": 8, "flood_refusals_per_interval": 9,
              "flood_delay": 10.0, "free_calls_per_interval": 11, "max_log_bytes_per_scope": 12_000,
              "max_refusal_log_bytes": 13, "scope_key_file": Path("k")}
    assert set(values) == set(SinglePortOptions.model_fields)
    config = SinglePortOptions(**values).config()
    assert config == GatewayConfig(out=Path("o"), max_requests_per_task=2, rate_limit_max_wait_sec=3.0,
                                   upstream_idle_timeout_sec=4.0, header_timeout_sec=5.0, max_connections_per_peer=6,
                                   refusal_interval_sec=7.0, refusal_rows_per_interval=8,
                                   flood_refusals_per_interval=9, flood_delay_sec=10.0, free_calls_per_interval=11,
                                   max_log_bytes_per_scope=12_000, max_refusal_log_bytes=13, scope_key_file=Path("k"))
