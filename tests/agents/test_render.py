"""Each adapter's rendered plan: configs parse, point at the task-scoped gateway with the placeholder token,
restrict tools to computer-use, deliver the instructions where the reference table says, carry no secret."""

from __future__ import annotations

import json

import orjson
import pytest
import tomllib
from pydantic import ValidationError

from hcu.computer_use.channels import tools_for
from hcu.osworld.agents import AGENT_NAMES, INHERITED_PATHS, MANAGED_CONFIG, get_adapter
from hcu.osworld.agents.base import PLACEHOLDER_TOKEN, AgentPlan
from hcu.osworld.errors import ConfigurationError
from tests.agents.conftest import make_context, require_artifact

# Codex's plan reads the model catalog from the real binary, so its rendering needs the artifact.
FAST_AGENTS = ["claude-code", "gemini-cli", "grok-build"]


def files(plan: AgentPlan) -> dict[str, bytes | None]:
    return {f.guest_path: f.data for f in plan.files}


def text(plan: AgentPlan, suffix: str) -> str:
    matches = [data for path, data in files(plan).items() if path.endswith(suffix)]
    assert len(matches) == 1 and matches[0] is not None, f"expected one {suffix}, got {list(files(plan))}"
    return matches[0].decode()


def flag(argv: list[str], name: str) -> str:
    assert name in argv, f"{name} missing from {argv}"
    return argv[argv.index(name) + 1]


def assert_no_secret(plan: AgentPlan, secrets: dict[str, str]) -> None:
    dump = orjson.dumps(plan.model_dump(mode="json", exclude={"files"})).decode()
    dump += "".join((f.data or b"").decode("utf-8", "replace") for f in plan.files)
    for name, secret in secrets.items():
        assert secret not in dump, f"host credential {name} leaked into the plan"
    assert PLACEHOLDER_TOKEN in dump or "ANTHROPIC_AUTH_TOKEN" in dump


@pytest.mark.parametrize("name", FAST_AGENTS)
def test_plan_has_no_credential_and_scoped_gateway(name, ctx, artifact_dir, secrets_in_env):
    plan = get_adapter(name).plan(ctx, artifact_dir)
    assert_no_secret(plan, secrets_in_env)
    everything = json.dumps(plan.env) + "".join((f.data or b"").decode() for f in plan.files)
    assert "http://172.17.0.1:8611/t/task-1.a1" in everything
    assert ctx.session_id in plan.run_argv and ctx.session_id in plan.resume_argv
    assert plan.mcp_server.command == ctx.computer_use_path
    assert plan.mcp_server.args[:2] == ["--channels", "gui,a11y,keyboard"]
    assert plan.mcp_server.env["DISPLAY"] == ":0"


def test_claude_gets_screenshots_it_will_not_shrink(ctx, artifact_dir):
    """Anthropic shrinks images over 1568 px on the long side; computer-use must downscale and map back."""
    args = get_adapter("claude-code").plan(ctx, artifact_dir).mcp_server.args
    assert args[args.index("--max-screenshot-width") + 1] == "1280"
    assert "--max-screenshot-width" not in get_adapter("gemini-cli").plan(ctx, artifact_dir).mcp_server.args


@pytest.mark.artifacts
def test_codex_config(ctx, artifact_dir, secrets_in_env):
    require_artifact("codex")
    plan = get_adapter("codex").plan(ctx, artifact_dir)
    assert_no_secret(plan, secrets_in_env)
    config = tomllib.loads(text(plan, "/home/codex/config.toml"))
    provider = config["model_providers"][config["model_provider"]]
    assert provider["base_url"] == "http://172.17.0.1:8611/t/task-1.a1/v1"
    assert provider["wire_api"] == "responses" and plan.env[provider["env_key"]] == PLACEHOLDER_TOKEN
    assert (config["model"], config["model_reasoning_effort"]) == ("m-1", "high")
    assert config["approval_policy"] == "never" and config["features"]["shell_tool"] is False
    assert config["features"]["plugins"] is False and config["analytics"]["enabled"] is False
    assert config["mcp_servers"]["cu"]["command"] == ctx.computer_use_path
    assert config["mcp_servers"]["cu"]["default_tools_approval_mode"] == "approve"
    assert text(plan, config["model_instructions_file"]) == ctx.base_instructions
    assert text(plan, "/home/codex/AGENTS.md") == ctx.profile_instructions
    assert plan.env["CODEX_HOME"] == ctx.path("home", "codex")
    catalog = json.loads(text(plan, config["model_catalog_json"]))
    assert [(m["slug"], m["supports_search_tool"]) for m in catalog["models"]] == [("m-1", False)]
    assert plan.run_argv[1:4] == ["exec", "--json", "--skip-git-repo-check"]
    assert plan.run_argv[-1] == ctx.prompt
    assert plan.resume_argv[1:4] == ["exec", "resume", "--last"]


@pytest.mark.artifacts
def test_codex_without_profile_has_no_agents_md(artifact_dir):
    require_artifact("codex")
    plan = get_adapter("codex").plan(make_context(profile_instructions=None), artifact_dir)
    assert not [p for p in files(plan) if p.endswith("AGENTS.md")]


def test_claude_code_flags_and_mcp_config(ctx, artifact_dir):
    plan = get_adapter("claude-code").plan(ctx, artifact_dir)
    argv = plan.run_argv
    assert {"--bare", "--strict-mcp-config", "--verbose"} <= set(argv)
    assert flag(argv, "--tools") == "" and flag(argv, "--permission-mode") == "dontAsk"
    assert flag(argv, "--allowedTools") == "mcp__cu__*" and flag(argv, "--output-format") == "stream-json"
    assert "--dangerously-skip-permissions" not in argv  # refused as root
    assert text(plan, flag(argv, "--system-prompt-file")) == ctx.base_instructions
    assert text(plan, flag(argv, "--append-system-prompt-file")) == ctx.profile_instructions
    assert (flag(argv, "--model"), flag(argv, "--effort"), flag(argv, "-p")) == ("m-1", "high", ctx.prompt)
    servers = json.loads(text(plan, flag(argv, "--mcp-config")))["mcpServers"]
    assert list(servers) == ["cu"] and servers["cu"]["type"] == "stdio"
    assert plan.env["ANTHROPIC_BASE_URL"] == "http://172.17.0.1:8611/t/task-1.a1"
    assert plan.env["ANTHROPIC_AUTH_TOKEN"] == PLACEHOLDER_TOKEN and "ANTHROPIC_API_KEY" not in plan.env
    assert plan.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert flag(plan.resume_argv, "--resume") == ctx.session_id


def test_claude_code_without_profile_appends_nothing(artifact_dir):
    plan = get_adapter("claude-code").plan(make_context(profile_instructions=None), artifact_dir)
    assert "--append-system-prompt-file" not in plan.run_argv


def test_gemini_settings_restrict_tools(artifact_dir):
    ctx = make_context(channels=["gui", "keyboard"], code_mode=True)
    plan = get_adapter("gemini-cli").plan(ctx, artifact_dir)
    settings = json.loads(text(plan, "/home/gemini/.gemini/settings.json"))
    expected = tools_for(["gui", "keyboard", "code"])
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["mcpServers"]["cu"]["includeTools"] == expected and "observe" not in expected
    assert settings["tools"]["core"] == [f"mcp_cu_{t}" for t in expected]
    assert settings["mcpServers"]["cu"]["args"] == ["--channels", "gui,keyboard", "--code-mode"]
    assert settings["telemetry"]["enabled"] is False and settings["general"]["enableAutoUpdate"] is False
    assert settings["model"]["name"] == "m-1"
    assert plan.env["GEMINI_CLI_NO_RELAUNCH"] == "true" and plan.env["GEMINI_API_KEY"] == PLACEHOLDER_TOKEN
    assert text(plan, plan.env["GEMINI_SYSTEM_MD"]) == ctx.base_instructions
    assert text(plan, "/home/gemini/.gemini/GEMINI.md") == ctx.profile_instructions
    assert plan.env["GEMINI_CLI_HOME"] == ctx.path("home", "gemini")
    tarball = [f for f in plan.files if f.guest_path.endswith("gemini-cli.tgz")][0]
    assert plan.prepare_argv[-1][:3] == ["tar", "-xzf", tarball.guest_path]
    assert plan.run_argv[1].endswith("/package/bundle/gemini.js")
    assert flag(plan.run_argv, "--approval-mode") == "yolo" and flag(plan.run_argv, "-o") == "stream-json"


def test_grok_config_and_prompt_override(ctx, artifact_dir):
    plan = get_adapter("grok-build").plan(ctx, artifact_dir)
    config = tomllib.loads(text(plan, "/home/grok/config.toml"))
    model = config["model"][config["models"]["default"]]
    assert model["base_url"] == "http://172.17.0.1:8611/t/task-1.a1/v1"
    assert model["api_backend"] == "responses"
    assert model["model"] == "m-1" and plan.env[model["env_key"]] == PLACEHOLDER_TOKEN
    assert all(v is False for v in config["compat"]["claude"].values())
    assert all(v is False for v in config["compat"]["cursor"].values())
    assert config["mcp_servers"]["cu"]["command"] == ctx.computer_use_path
    override = flag(plan.run_argv, "--system-prompt-override")
    assert override.startswith(ctx.base_instructions) and override.endswith(ctx.profile_instructions)
    assert flag(plan.run_argv, "--tools") == "search_tool,use_tool"
    assert flag(plan.run_argv, "--output-format") == "streaming-json" and "--always-approve" in plan.run_argv
    assert flag(plan.resume_argv, "--resume") == ctx.session_id


def test_registry_defaults():
    table = {n: (d.provider.name, d.model, d.effort, d.gateway_port) for n in AGENT_NAMES
             for d in [get_adapter(n).cli]}
    assert table == {
        "codex": ("openai", "gpt-5.5", "xhigh", 8611),
        "claude-code": ("anthropic", "claude-opus-5", "xhigh", 8537),
        "gemini-cli": ("gemini", "gemini-3.8-flash", "high", 8571),
        "grok-build": ("openai", "grok-4.7", "xhigh", 8611),
    }
    must_go = {".codex", ".claude", ".claude.json", ".gemini", ".grok", "AGENTS.md", "CLAUDE.md", "GEMINI.md",
               ".mcp.json", ".cursor", ".envrc", ".env"}
    assert must_go <= set(INHERITED_PATHS)
    assert set(MANAGED_CONFIG) == {"/etc/codex", "/etc/claude-code", "/etc/gemini-cli", "/etc/grok"}


def test_gateway_url_trailing_slash_is_dropped():
    assert make_context(gateway_url="http://172.17.0.1:8611/").scoped_url("/v1") == \
        "http://172.17.0.1:8611/t/task-1.a1/v1"


def test_unknown_agent_is_a_clear_error():
    with pytest.raises(ValueError, match="--agent: unknown agent 'cursor'; expected one of codex"):
        get_adapter("cursor")


@pytest.mark.parametrize("field,value", [("gateway_url", "172.17.0.1:8611"), ("gateway_url", "http://h/x/"),
                                         ("scope", "a/b"), ("session_id", "not-a-uuid"), ("channels", [])])
def test_context_rejects_bad_fields(field, value):
    with pytest.raises(ValidationError, match=field):
        make_context(**{field: value})


@pytest.mark.parametrize("name", AGENT_NAMES)
def test_missing_artifact_is_named(name, ctx, tmp_path):
    """a missing artifact is a configuration error (never retried), naming the file."""
    expected = f"agent artifacts missing: {tmp_path}/.*run `make agents`"
    with pytest.raises(ConfigurationError, match=expected) as missing:
        get_adapter(name).plan(ctx, tmp_path)
    assert missing.value.classification == "configuration"


@pytest.mark.parametrize("name", FAST_AGENTS)
def test_agent_binary_is_the_file_that_is_uploaded(name, ctx, artifact_dir, tmp_path):
    """agent_binary names the CLI that runs, not just its folder."""
    cli = get_adapter(name).cli.artifacts[0].name
    renamed = tmp_path / "elsewhere" / f"my-{cli}"
    renamed.parent.mkdir()
    renamed.symlink_to(artifact_dir / cli)
    plan = get_adapter(name).plan(ctx, artifact_dir, renamed)
    uploaded = [f.host_path for f in plan.files if f.host_path is not None]
    assert renamed in uploaded and artifact_dir / cli not in uploaded


@pytest.mark.parametrize("name", FAST_AGENTS)
def test_a_scope_secret_replaces_the_placeholder(name, artifact_dir):
    secret = "hcu1-" + "ab" * 32
    ctx = make_context(gateway_token=secret)
    plan = get_adapter(name).plan(ctx, artifact_dir)
    assert secret in plan.env.values() and PLACEHOLDER_TOKEN not in plan.env.values()
    assert secret not in repr(ctx)
