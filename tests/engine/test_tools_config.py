"""tools.json and the pasted `mcpServers` JSON: round trips, damaged files set aside, one clear sentence
for what cannot be used, header secrets only in the keychain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.storage.secrets import SecretStore
from ember_chat.engine.tools.config import (
    BuiltinToolsConfig,
    McpServerConfig,
    ToolsConfig,
    ToolsConfigFile,
    header_secret,
    mcp_servers_json,
    move_headers_to_keychain,
    parse_mcp_servers,
    save_header_secret,
)

CLAUDE_DESKTOP = """
{
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop", 8080],
      "env": {"DEBUG": "1", "PORT": 3000}
    },
    "remote": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer abc"}},
    "old-style": {"serverUrl": "http://127.0.0.1:9000/mcp"},
    "off": {"command": "uvx", "args": ["mcp-server-time"], "disabled": true, "cwd": "/tmp"}
  }
}
"""


def test_claude_desktop_json_is_read_in_order() -> None:
    servers = parse_mcp_servers(CLAUDE_DESKTOP)
    assert [s.name for s in servers] == ["filesystem", "remote", "old-style", "off"]
    fs, remote, old, off = servers
    assert (fs.transport, fs.command) == ("stdio", "npx")
    assert fs.args == ("-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop", "8080")
    assert fs.env == {"DEBUG": "1", "PORT": "3000"}
    assert (remote.transport, remote.url, remote.headers) == (
        "http",
        "https://mcp.example.com/mcp",
        {"Authorization": "Bearer abc"},
    )
    assert (old.transport, old.url) == ("http", "http://127.0.0.1:9000/mcp")
    assert (off.enabled, off.cwd) == (False, "/tmp")
    # the bare inner mapping and VS Code's "servers" are the same servers
    inner = json.dumps(json.loads(CLAUDE_DESKTOP)["mcpServers"])
    assert parse_mcp_servers(inner) == servers
    assert parse_mcp_servers(json.dumps({"servers": json.loads(inner)})) == servers


def test_export_gives_back_what_was_pasted_without_secrets() -> None:
    servers = parse_mcp_servers(CLAUDE_DESKTOP)
    with_secret = servers[1].with_changes(headers={"X-Team": "blue"}, secret_headers=("Authorization",))
    exported = mcp_servers_json([servers[0], with_secret, *servers[2:]])
    assert "Bearer" not in exported and "Authorization" not in exported
    again = parse_mcp_servers(exported)
    assert again[0] == servers[0] and again[2:] == servers[2:]
    assert again[1].headers == {"X-Team": "blue"}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "Nothing was pasted"),
        ('{"mcpServers": {"a": {"command": "x",}}}', "not valid JSON"),
        ("[1, 2]", "must be an object"),
        ('{"mcpServers": []}', "mcpServers must map"),
        ('{"mcpServers": {}}', "lists no servers"),
        ('{"command": "npx", "args": []}', "one server without a name"),
        ('{"mcpServers": {"fs": {"args": ["x"]}}}', "'fs' has neither a command nor a url"),
        ('{"mcpServers": {"fs": {"command": ""}}}', "'fs' needs a command"),
        ('{"mcpServers": {"fs": {"command": "npx", "args": "-y x"}}}', "'fs': args must be a list"),
        ('{"mcpServers": {"fs": {"command": "npx", "env": {"A": [1]}}}}', "'fs': env (A) must hold strings"),
        ('{"mcpServers": {"web": {"type": "sse", "url": "http://h/sse"}}}', "'web' uses the older SSE"),
        ('{"mcpServers": {"web": {"url": "ftp://h/x"}}}', "'web' needs an http(s) address"),
        ('{"mcpServers": {"web": {"url": "http://h/mcp", "command": "x"}}}', "both a command and a url"),
        ('{"mcpServers": {"a/b": {"command": "x"}}}', "without '/'"),
        ('{"mcpServers": {"Built-in": {"command": "x"}}}', "Ember's own tools"),
        ('{"mcpServers": {"A": {"command": "x"}, "a": {"command": "y"}}}', "two servers 'a'"),
    ],
)
def test_bad_pasted_json_gives_one_clear_sentence(text: str, words: str) -> None:
    with pytest.raises(InvalidParameter) as caught:
        parse_mcp_servers(text)
    message = str(caught.value)
    assert words in message
    assert message.endswith(".") and "\n" not in message and "Error" not in message


def test_config_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "config" / "tools.json"
    file = ToolsConfigFile(path)
    assert file.load() == ToolsConfig() and file.problem is None
    config = ToolsConfig(
        servers=(
            *parse_mcp_servers(CLAUDE_DESKTOP)[:1],
            McpServerConfig(
                "héllo",
                "http",
                url="http://127.0.0.1:1/mcp",
                headers={"X-Team": "blue"},
                secret_headers=("Authorization",),
                enabled=False,
                start_timeout_s=5,
                call_timeout_s=7.5,
            ),
        ),
        builtin=BuiltinToolsConfig(datetime=True, files=True, folders=("/tmp/a", "/tmp/b")),
        never_ask=frozenset({"héllo/read", "Built-in/read_file"}),
        max_calls=3,
    )
    file.save(config)
    assert [p.name for p in path.parent.iterdir()] == ["tools.json"]  # no temporary file left
    loaded = ToolsConfigFile(path).load()
    assert loaded == config
    assert loaded.servers[1].start_timeout_s == 5.0
    assert loaded.with_changes(max_calls=4).max_calls == 4 and loaded.server("héllo") == config.servers[1]


@pytest.mark.parametrize("content", [b'{"mcpServers": {"a": ', b"\xff\xfe not text", b"[1, 2, 3]"])
def test_a_damaged_tools_json_is_set_aside(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "tools.json"
    path.write_bytes(content)
    file = ToolsConfigFile(path)
    assert file.load() == ToolsConfig()
    assert file.problem is not None and "tools start empty" in file.problem
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("tools.damaged-")]
    assert len(aside) == 1 and aside[0].read_bytes() == content and str(aside[0]) in file.problem
    assert not path.exists()
    file.save(ToolsConfig(max_calls=2))  # saving afterwards never touches the set-aside copy
    assert aside[0].read_bytes() == content and ToolsConfigFile(path).load().max_calls == 2


def test_one_bad_server_keeps_the_others_and_the_file(tmp_path: Path) -> None:
    path = tmp_path / "tools.json"
    data = {
        "mcpServers": {"good": {"command": "uvx", "args": ["a"]}, "bad": {"args": ["no command"]}},
        "maxCalls": 500,
    }
    path.write_text(json.dumps(data))
    file = ToolsConfigFile(path)
    config = file.load()
    assert [s.name for s in config.servers] == ["good"] and config.max_calls == 8
    assert file.problem is not None
    assert "'bad' has neither a command nor a url" in file.problem and "maxCalls 500" in file.problem
    assert "the rest was loaded" in file.problem
    aside = next(p for p in tmp_path.iterdir() if p.name.startswith("tools.damaged-"))
    assert json.loads(aside.read_text()) == data


def test_header_secrets_live_in_the_keychain(tmp_path: Path) -> None:
    secrets = SecretStore("ember-chat-test-tools")
    pasted = parse_mcp_servers(CLAUDE_DESKTOP)[1].with_changes(name="remote-secret-test")
    moved = move_headers_to_keychain(
        pasted.with_changes(headers={"Authorization": "Bearer abc", "X-Team": "b"}), secrets
    )
    assert moved.headers == {"X-Team": "b"} and moved.secret_headers == ("Authorization",)
    assert header_secret("remote-secret-test", "Authorization", secrets) == "Bearer abc"
    file = ToolsConfigFile(tmp_path / "tools.json")
    file.save(ToolsConfig(servers=(moved,)))
    assert "Bearer" not in (tmp_path / "tools.json").read_text()
    save_header_secret("remote-secret-test", "Authorization", "", secrets)  # empty: forgotten
    assert header_secret("remote-secret-test", "Authorization", secrets) is None


def test_bad_settings_are_refused_with_a_sentence() -> None:
    with pytest.raises(InvalidParameter, match="between 1 and 3600 seconds"):
        McpServerConfig("a", command="x", call_timeout_s=0)
    with pytest.raises(InvalidParameter, match="stdio or http"):
        McpServerConfig("a", "ws", url="ws://h")
    with pytest.raises(InvalidParameter, match="Two MCP servers are named 'a'"):
        ToolsConfig(servers=(McpServerConfig("a", command="x"), McpServerConfig("a", command="y")))
    with pytest.raises(InvalidParameter, match="between 1 and 100"):
        ToolsConfig(max_calls=0)
    with pytest.raises(InvalidParameter, match="both plain and secret"):
        McpServerConfig(
            "a", "http", url="http://h/mcp", headers={"Authorization": "x"}, secret_headers=("authorization",)
        )
