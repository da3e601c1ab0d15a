"""The MCP client against real MCP servers written with the official SDK (tests/mcp_servers/), started
by the tests: listed, called, timed out (the hung server's process group killed), crashed and
restarted, flooding, several at once, and over streamable HTTP with a secret header."""

from __future__ import annotations

import contextlib
import gc
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ember_chat.engine.core.tools import ToolCall
from ember_chat.engine.errors import ToolError
from ember_chat.engine.storage.secrets import SecretStore
from ember_chat.engine.tools.config import McpServerConfig, save_header_secret
from ember_chat.engine.tools.mcp_client import McpManager, McpServer
from ember_chat.engine.tools.mcp_log import LOG_LIMIT
from tests.helpers.mcp_stdio import SERVERS, stdio

KEY = "s3cret-key-for-the-test"


def call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(f"id{name}"[:9], name, dict(arguments))


def group_alive(pgid: int) -> bool:
    """Whether any live (not zombie) process is still in the process group."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """For what has no signal to wait on (another process's output, a process group ending)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition did not become true in time"
        time.sleep(0.02)


@pytest.fixture
def manager() -> Iterator[McpManager]:
    manager = McpManager()
    yield manager
    manager.close()


def one(manager: McpManager, config: McpServerConfig) -> McpServer:
    manager.configure([config])
    server = manager.server(config.name)
    assert server is not None
    return server


def test_list_and_call(manager: McpManager) -> None:
    server = one(manager, stdio("notes", "normal.py").with_changes(env={"NOTES_MODE": "test"}))
    assert (server.source, server.state) == ("notes", "stopped")  # configure starts nothing
    tools = {t.name: t for t in server.list_tools(timeout_s=10)}
    assert server.state == "running" and server.last_error is None
    assert set(tools) == {"add", "read_note", "fail", "pid"}
    assert [n for n, t in tools.items() if t.read_only] == ["read_note"]
    add = tools["add"]
    assert add.description == "Add two integers."
    assert add.parameters["properties"]["a"]["type"] == "integer" and set(add.parameters["required"]) == {"a", "b"}
    result = server.call(call("add", a=2, b=40))
    assert (result.content, result.is_error, result.call_id, result.name) == ("42", False, "idadd", "add")
    assert result.duration_ms is not None and result.duration_ms > 0
    assert server.call(call("read_note", key="todo")).content == "write tests"
    failed = server.call(call("fail", reason="the disk is on fire"))
    assert failed.is_error and "the disk is on fire" in failed.content
    unknown = server.call(call("no_such_tool"))
    assert unknown.is_error and "no_such_tool" in unknown.content
    assert "normal server: ready" in server.stderr_text()
    pid = server.pid
    assert pid is not None and group_alive(pid)
    assert server.call(call("pid")).content == str(pid)
    log = server.stderr_text()
    assert "[info] pid was asked" in log  # a log message sent over MCP
    environment = log.split("environment: ")[1].splitlines()[0]
    assert "'NOTES_MODE'" in environment and "'PATH'" in environment
    assert "EMBER_TEST_KEYRING" not in environment  # Ember's own environment does not leak to servers
    server.stop()
    assert server.state == "stopped" and server.pid is None
    wait_until(lambda: not group_alive(pid))


def test_answers_beside_text_and_names_ember_cannot_offer(manager: McpManager) -> None:
    server = one(manager, stdio("shapes", "shapes.py"))
    assert [t.name for t in server.list_tools()] == ["picture", "document"]
    assert "[Ember] Tool 'look around' was skipped: a tool name is letters, digits" in server.stderr_text()
    picture = server.call(call("picture"))
    assert picture.content == "a red dot\n[image image/png, 100 bytes, not shown to the model]"
    assert server.call(call("document")).content == "the resource's text"


def test_a_server_on_its_own_runs_its_own_loop() -> None:
    server = McpServer(stdio("alone", "normal.py"))
    try:
        assert server.call(call("add", a=1, b=1)).content == "2"
        assert [t.name for t in threading.enumerate() if t.name.startswith("ember-mcp")] == ["ember-mcp-alone"]
        pid = server.pid
        assert pid is not None
    finally:
        server.stop()
    assert not [t for t in threading.enumerate() if t.name.startswith("ember-mcp")]
    assert not group_alive(pid)


def test_a_hung_call_is_killed_with_its_process_group(manager: McpManager) -> None:
    server = one(manager, stdio("stuck", "hang.py"))
    assert server.call(call("quick")).content == "quick answer"
    pid = server.pid
    assert pid is not None
    began = time.monotonic()
    result = server.call(call("hang"), timeout_s=1.0)
    assert time.monotonic() - began < 5
    assert result.is_error
    assert "The tool 'hang' of the MCP server 'stuck' did not answer within 1 s" in result.content
    assert "Ember stopped the server" in result.content
    helper = int(server.stderr_text().split("helper pid ")[1].split()[0])
    assert not group_alive(pid)  # the server and the helper it started: the whole group
    assert not alive(helper)
    assert server.state == "failed" and server.last_error == result.content
    again = server.call(call("quick"))  # the next call starts it again
    assert (again.content, again.is_error) == ("quick answer", False)
    assert server.state == "running" and server.pid != pid


def test_a_server_that_hangs_at_start_is_stopped(manager: McpManager) -> None:
    config = stdio("slow", "hang.py", "--at-start").with_changes(start_timeout_s=1)
    server = one(manager, config)
    with pytest.raises(ToolError) as caught:
        server.list_tools()
    assert "The MCP server 'slow' did not start within 1 s, so Ember stopped it." in str(caught.value)
    assert server.state == "failed" and server.last_error == str(caught.value)
    assert "hanging before it starts" in server.stderr_text()
    result = server.call(call("quick"))  # a call says the same, never raises
    assert result.is_error and "did not start within 1 s" in result.content and result.duration_ms is None


def test_settings_changed_while_a_server_starts_never_wait_for_it(manager: McpManager) -> None:
    server = one(manager, stdio("slow", "hang.py", "--at-start"))
    with ThreadPoolExecutor(1) as pool:
        starting = pool.submit(server.list_tools)
        wait_until(lambda: "hanging before it starts" in server.stderr_text())
        assert server.state == "starting"
        pid = server.pid
        assert pid is not None
        began = time.monotonic()
        manager.configure([])  # from the GUI thread: must not wait for the start
        assert time.monotonic() - began < 1.0
        with pytest.raises(ToolError, match="'slow' was stopped while it was starting"):
            starting.result(timeout=10)
    assert server.state == "stopped"
    wait_until(lambda: not group_alive(pid))


def test_a_call_waiting_for_its_server_to_start_can_be_stopped(manager: McpManager) -> None:
    server = one(manager, stdio("slow", "hang.py", "--at-start"))
    cancel = threading.Event()
    with ThreadPoolExecutor(2) as pool:
        pending = pool.submit(server.call, call("quick"), 60.0, cancel)
        wait_until(lambda: "hanging before it starts" in server.stderr_text())
        cancel.set()
        result = pending.result(timeout=5)
        assert result.is_error and result.duration_ms is None
        assert result.content == "The call was stopped before it ran (its server was still starting)."
        assert server.state == "starting"  # the start goes on; the next caller waits for the same one
        listing = pool.submit(server.list_tools)
        manager.configure([])
        with pytest.raises(ToolError, match=r"was stopped while it was starting|is no longer in use"):
            listing.result(timeout=10)
    with pytest.raises(ToolError, match="'slow' is no longer in use"):
        server.list_tools()  # a server its manager let go is never started again
    assert "Starting the server again" not in server.stderr_text()


def test_a_crash_mid_call_is_an_error_and_the_next_call_restarts_it(manager: McpManager) -> None:
    server = one(manager, stdio("crashy", "crash.py"))
    first = server.call(call("ok")).content
    result = server.call(call("crash", code=3))
    assert result.is_error
    assert "The MCP server 'crashy' stopped while running 'crash' (exit code 3): crash server: exiting with 3." in (
        result.content
    )
    assert "Ember starts it again" in result.content
    assert server.state == "failed"
    again = server.call(call("ok"))
    assert not again.is_error and again.content.startswith("ok from ") and again.content != first
    assert server.state == "running"
    assert "[Ember] Starting the server again." in server.stderr_text()


def test_servers_that_cannot_start_say_why(manager: McpManager) -> None:
    manager.configure(
        [
            stdio("broken", "crash.py", "--exit-at-start"),
            McpServerConfig("missing", command="ember-no-such-command-here"),
            McpServerConfig("nowhere", command=sys.executable, cwd="/no/such/folder/here"),
        ]
    )
    messages = {}
    for server in manager.servers():
        with pytest.raises(ToolError) as caught:
            server.list_tools(timeout_s=10)
        messages[server.source] = str(caught.value)
        assert server.state == "failed"
    assert messages["broken"].startswith(
        "The MCP server 'broken' exited while starting (exit code 2): crash server: missing configuration file "
        "settings.toml."
    )
    assert "the command 'ember-no-such-command-here' was not found" in messages["missing"]
    assert "The working folder /no/such/folder/here of the MCP server 'nowhere' does not exist" in messages["nowhere"]


def test_a_flood_never_blocks(manager: McpManager) -> None:
    server = one(manager, stdio("noisy", "flood.py"))
    assert [t.name for t in server.list_tools()] == ["flood"]  # after 20000 lines of noise on stdout
    assert "not an MCP message (ignored): this is not an MCP message" in server.stderr_text()
    result = server.call(call("flood", megabytes=4), timeout_s=30)
    assert (result.content, result.is_error) == ("flooded", False)
    log = server.stderr_text()
    assert len(log.encode()) <= LOG_LIMIT + 200
    assert log.startswith("[Ember] … ") and "earlier bytes are not kept" in log
    assert "flood server: the end of the flood" in log
    assert server.call(call("flood", megabytes=1)).content == "flooded"


def test_two_servers_at_once_and_one_hung_does_not_hold_the_other(manager: McpManager) -> None:
    manager.configure([stdio("stuck", "hang.py"), stdio("notes", "normal.py"), stdio("crashy", "crash.py")])
    assert [s.source for s in manager.servers()] == ["stuck", "notes", "crashy"]
    stuck, notes, crashy = manager.servers()
    for server in manager.servers():
        server.list_tools()
    with ThreadPoolExecutor(4) as pool:
        hung = pool.submit(stuck.call, call("hang"), 3.0)
        wait_until(lambda: "helper pid" in stuck.stderr_text())
        sums = [pool.submit(notes.call, call("add", a=i, b=i)) for i in range(3)]
        ok = pool.submit(crashy.call, call("ok"))
        assert [f.result(timeout=20).content for f in sums] == ["0", "2", "4"]
        assert ok.result(timeout=20).content.startswith("ok from ")
        assert not hung.done()  # the others answered while this one hangs
        assert hung.result(timeout=20).is_error
    assert notes.state == "running" and crashy.state == "running" and stuck.state == "failed"


def test_a_cancelled_call_returns_at_once(manager: McpManager) -> None:
    server = one(manager, stdio("stuck", "hang.py"))
    cancel = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(server.call, call("hang"), 60.0, cancel)
        wait_until(lambda: "helper pid" in server.stderr_text())
        cancel.set()
        result = pending.result(timeout=5)
    assert result.is_error and result.content == "The call was stopped before the tool answered."
    pid = server.pid
    assert pid is not None
    server.stop()  # a hung server: stdin closed, then its group killed after the grace
    assert not group_alive(pid)


def test_a_call_running_when_its_server_is_stopped_says_so(manager: McpManager) -> None:
    server = one(manager, stdio("stuck", "hang.py"))
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(server.call, call("hang"), 60.0)
        wait_until(lambda: "helper pid" in server.stderr_text())
        pid = server.pid
        assert pid is not None
        manager.configure([])
        result = pending.result(timeout=10)
    assert result.is_error and result.content == (
        "The MCP server 'stuck' was stopped while running 'hang' (its settings changed, or Ember is closing)."
    )
    wait_until(lambda: not group_alive(pid))


def test_configure_keeps_unchanged_servers_and_stops_the_others(manager: McpManager) -> None:
    notes, crashy = stdio("notes", "normal.py"), stdio("crashy", "crash.py")
    manager.configure([notes, crashy, stdio("off", "normal.py").with_changes(enabled=False)])
    assert [s.source for s in manager.servers()] == ["notes", "crashy"] and manager.server("off") is None
    kept, changed = manager.server("notes"), manager.server("crashy")
    assert kept is not None and changed is not None
    kept.list_tools()
    changed.list_tools()
    old_pid = changed.pid
    assert old_pid is not None
    manager.configure([notes, crashy.with_changes(call_timeout_s=5)])
    assert manager.server("notes") is kept and kept.state == "running"
    assert manager.server("crashy") is not changed and changed.state == "stopped"
    wait_until(lambda: not group_alive(old_pid))
    manager.configure([])
    assert manager.servers() == [] and kept.state == "stopped"


# ----- streamable HTTP


@contextlib.contextmanager
def http_server() -> Iterator[str]:
    """tests/mcp_servers/http_server.py in a process of its own; its URL. Stopped (stdin closed) and waited for."""
    process = subprocess.Popen(
        [sys.executable, str(SERVERS / "http_server.py"), KEY],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture
def http_url() -> Iterator[str]:
    with http_server() as url:
        yield url


def test_http_with_the_secret_header(http_url: str) -> None:
    secrets = SecretStore("ember-chat-test-mcp")
    save_header_secret("web", "X-Api-Key", KEY, secrets)
    manager = McpManager(secrets)
    try:
        config = McpServerConfig("web", "http", url=http_url, headers={"X-Team": "a"}, secret_headers=("X-Api-Key",))
        server = one(manager, config)
        assert [t.name for t in server.list_tools(timeout_s=10)] == ["whoami", "slow"]
        result = server.call(call("whoami", greeting="hello"))
        assert (result.content, result.is_error) == ("hello from the HTTP server", False)
        late = server.call(call("slow"), timeout_s=0.5)
        assert late.is_error and late.content == (
            "The tool 'slow' of the MCP server 'web' did not answer within 0.5 s; Ember gave up waiting."
        )
        assert server.call(call("whoami", greeting="still")).content == "still from the HTTP server"
        assert server.state == "running" and server.pid is None
        wrong = one(manager, config.with_changes(url=http_url[: -len("mcp")] + "nope"))
        with pytest.raises(ToolError) as caught:
            wrong.list_tools(timeout_s=10)
        assert (
            str(caught.value) == "The MCP server 'web' has no MCP endpoint at that address (HTTP 404); check its URL."
        )
    finally:
        manager.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("ember-mcp")]  # the loop thread joined


@pytest.mark.parametrize("stored", ["wrong-key", None])
def test_http_with_a_wrong_or_absent_header_says_so(http_url: str, stored: str | None) -> None:
    secrets = SecretStore("ember-chat-test-mcp")
    save_header_secret("web", "X-Api-Key", stored or "", secrets)
    manager = McpManager(secrets)
    try:
        with_secret = McpServerConfig("web", "http", url=http_url, secret_headers=("X-Api-Key",))
        without = McpServerConfig("plain", "http", url=http_url)
        manager.configure([with_secret, without])
        messages = []
        for server in manager.servers():
            with pytest.raises(ToolError) as caught:
                server.list_tools(timeout_s=10)
            messages.append(str(caught.value))
            assert server.state == "failed" and server.last_error == messages[-1]
        if stored:
            assert messages[0].startswith("The MCP server 'web' refused Ember (HTTP 401)")
        else:
            assert messages[0] == (
                "The X-Api-Key header of the MCP server 'web' is not in the system keychain; enter it again in "
                "Settings ▸ Tools."
            )
        assert messages[1] == (
            "The MCP server 'plain' refused Ember (HTTP 401): its token or headers are missing or wrong. "
            "Check the headers in Settings ▸ Tools."
        )
    finally:
        manager.close()


def test_an_unreachable_http_server_says_so(manager: McpManager) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = one(manager, McpServerConfig("gone", "http", url=f"http://127.0.0.1:{port}/mcp", start_timeout_s=5))
    with pytest.raises(ToolError) as caught:
        server.list_tools()
    message = str(caught.value)
    assert message.startswith("The MCP server 'gone' could not be used: it could not be reached")
    assert message.endswith("Check its URL and that it is running.")
    assert os.environ.get("PYTHON_KEYRING_BACKEND")  # the tests' keychain, never the real one


def test_an_http_server_that_goes_away_is_said_at_once(manager: McpManager) -> None:
    with http_server() as url:
        server = one(manager, McpServerConfig("web", "http", url=url, headers={"X-Api-Key": KEY}))
        assert server.call(call("whoami", greeting="hi")).content == "hi from the HTTP server"
    result = server.call(call("whoami", greeting="hi"))  # its process has ended
    assert result.is_error and result.content.startswith("The MCP server 'web' could not be used: it could not be")
    assert server.state == "failed" and server.last_error == result.content
    assert result.content in server.stderr_text()  # an HTTP server has no stderr: Ember's notes are its log


def test_a_server_stopped_while_its_process_is_made_leaves_nothing_behind() -> None:
    """A stop can come while the process is still being made (the window closed at once after Start
    again): the process is still ended and reaped, its pipes closed (no ResourceWarning, an error
    under this suite's warning filter, from a half-made process left to the garbage collector)."""
    for delay_ms in [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0] * 2:
        manager = McpManager()
        manager.configure([stdio("notes", "normal.py")])
        server = manager.server("notes")
        assert server is not None
        with ThreadPoolExecutor(1) as pool:
            listing = pool.submit(server.list_tools)  # starts the server
            time.sleep(delay_ms / 1000)  # where the stop lands in the start: spread over the process's making
            manager.close()
            with pytest.raises(ToolError):
                listing.result(timeout=10)
        gc.collect()
        assert server.state == "stopped"
