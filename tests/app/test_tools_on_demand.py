"""MCP servers start on demand: a window remembers each server's tools from the last time it listed them
(mcp-tools-cache.json in the data folder, keyed by the server's name and a fingerprint of its settings),
offers them at start without starting any server process, and starts a server only when one of its tools
is called (or, for a server it has no tools remembered for, when the Tools popup or Settings ▸ Tools
opens). Real window, real stdio servers written with the official SDK (tests/mcp_servers)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.core.tools import ToolCall, ToolSpec
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.tools.config import McpServerConfig, ToolsConfig
from ember_chat.engine.tools.mcp_client import McpServer
from ember_chat.engine.tools.tools_cache import CACHE_FILE, ToolsCache, server_fingerprint
from tests.app import test_tool_turns as turns
from tests.helpers.tool_script import ToolScriptBackend, Turn
from tests.helpers.tools_window_support import SERVERS, WAIT_MS, LoopProbe, open_tools, stdio_server, write_tools
from tests.helpers.window import load

LEFT = Qt.MouseButton.LeftButton
popup_grab = pytest.mark.qt_log_ignore("This plugin does not support grabbing the keyboard")
NOTES = stdio_server("notes", "normal.py")


def server_processes(script: str) -> list[psutil.Process]:
    """This test's child processes running tests/mcp_servers/<script>."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if str(SERVERS / script) in child.cmdline():
                found.append(child)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return found


def cache_file(paths: AppPaths) -> Path:
    return paths.data_dir / CACHE_FILE


def cached_names(paths: AppPaths, server: McpServerConfig) -> list[str] | None:
    specs = ToolsCache(cache_file(paths)).get(server)
    return None if specs is None else [s.name for s in specs]


def listing_done(qtbot: QtBot, w: MainWindow) -> None:
    """The window's first listing has ended (it may end while make_window waits for the model list, so
    waiting for the `listed` signal here could miss it)."""
    qtbot.waitUntil(lambda: not w.tools.listing, timeout=WAIT_MS)


def remember_tools(qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths) -> None:
    """A first launch: the Tools popup lists the server (it starts), its tools are remembered; Ember quits."""
    w = make_window()
    qtbot.mouseClick(w.tools.button, LEFT)
    qtbot.waitUntil(lambda: "notes/add" in w.tools.button.popup.boxes, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: cached_names(paths, NOTES) == ["add", "read_note", "fail", "pid"], timeout=WAIT_MS)
    w.close()
    assert server_processes("normal.py") == []


@popup_grab
def test_a_window_starts_no_server_offers_its_remembered_tools_and_a_call_starts_it(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths, probe: LoopProbe
) -> None:
    write_tools(paths, ToolsConfig(servers=(NOTES,)))
    remember_tools(qtbot, make_window, paths)
    call = ToolCall("call00091", "add", {"a": 40, "b": 2}, '{"a": 40, "b": 2}')
    backend = ToolScriptBackend([Turn("Adding.", [call]), Turn("It is 42.")])
    w = make_window(lambda _ref: backend)
    load(qtbot, w, "tiny.gguf")
    qtbot.waitUntil(lambda: w.tools.registry.entry("notes/add") is not None, timeout=WAIT_MS)
    assert not w.tools.listing
    server = w.tools.manager.server("notes")
    assert server is not None and server.pid is None and server.state == "stopped"
    assert server_processes("normal.py") == []
    # the Tools popup shows the remembered tools (read-only marked), and opening it starts nothing
    qtbot.mouseClick(w.tools.button, LEFT)
    popup = w.tools.button.popup
    assert list(popup.boxes) == ["notes/add", "notes/read_note", "notes/fail", "notes/pid"]
    assert popup.boxes["notes/read_note"].text() == "read_note  (read-only)"
    assert not any(label.text() == "Starting…" for label in popup.findChildren(QLabel))
    assert not w.tools.listing and server.pid is None
    qtbot.mouseClick(popup.boxes["notes/add"], LEFT)
    w.tools.button.frame.close()
    assert w.tools.button.whole_text().startswith("Tools (1)")
    # the model calls it: the call starts the server (off the GUI thread) and its result comes back
    turns.send(qtbot, w, "What is 40 + 2?")
    turns.asking(qtbot, w)
    assert server.pid is None and server_processes("normal.py") == []  # still not started: the card waits
    probe.start()
    turns.press(qtbot, w, "Allow once")
    qtbot.waitUntil(lambda: len(backend.requests) == 2, timeout=WAIT_MS)  # the result went back to the model
    probe.stop()
    turns.idle(qtbot, w)
    text = turns.text_of(w)
    assert "Result\n42\n" in text and turns.below_cards(text, "It is 42.")
    assert server.state == "running" and [p.pid for p in server_processes("normal.py")] == [server.pid]
    assert probe.beats > 20
    print(f"longest event-loop gap while the server started for the call: {probe.longest_gap_ms:.1f} ms")
    # (≤ 50 ms is the budget: the GUI thread's own work between two beats; a shared CI core is noisy)
    assert probe.longest_busy_ms < 50 and probe.longest_gap_ms < 250, (probe.longest_busy_ms, probe.longest_gap_ms)


@popup_grab
def test_a_server_whose_settings_changed_is_not_offered_its_old_tools(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    write_tools(paths, ToolsConfig(servers=(NOTES,)))
    remember_tools(qtbot, make_window, paths)
    changed = NOTES.with_changes(args=(str(SERVERS / "shapes.py"),))  # same name, another program
    assert server_fingerprint(changed) != server_fingerprint(NOTES)
    write_tools(paths, ToolsConfig(servers=(changed,)))
    w = make_window()
    listing_done(qtbot, w)
    assert [e.key for e in w.tools.registry.entries()] == []  # the old tools are not offered
    assert w.tools.manager.server("notes").pid is None and server_processes("shapes.py") == []
    # Settings ▸ Tools lists it (it starts): its own tools, now remembered under its new settings
    open_tools(w)
    qtbot.waitUntil(lambda: bool(w.tools.server_entries("notes")), timeout=WAIT_MS)
    names = {e.original_name for e in w.tools.server_entries("notes")}
    assert names == {"picture", "document"}  # ("look around" has a name no template takes: left out)
    qtbot.waitUntil(lambda: cached_names(paths, changed) is not None, timeout=WAIT_MS)
    assert "add" not in cached_names(paths, changed)
    assert cached_names(paths, NOTES) is None  # (the old settings' tools are not offered for the new ones)


@pytest.mark.parametrize(
    "damage",
    [
        b"\x00\xffnot json at all {",
        b'{"version": 1, "servers": {"notes": {"fingerprint": "FP", "tools": [{"name": 7}]}}}',
        b'["a list"]',
    ],
    ids=["garbage", "bad-tool", "wrong-shape"],
)
@popup_grab
def test_a_damaged_cache_file_is_ignored_and_written_again(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths, damage: bytes
) -> None:
    write_tools(paths, ToolsConfig(servers=(NOTES,)))
    paths.data_dir.mkdir(parents=True, exist_ok=True)
    cache_file(paths).write_bytes(damage.replace(b"FP", server_fingerprint(NOTES).encode()))
    w = make_window()
    listing_done(qtbot, w)
    assert w.tools.registry.entries() == [] and not w.banner.isVisible()  # nothing to say: it is only a cache
    qtbot.mouseClick(w.tools.button, LEFT)  # a server without remembered tools is listed when the popup opens
    qtbot.waitUntil(lambda: "notes/add" in w.tools.button.popup.boxes, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: cached_names(paths, NOTES) == ["add", "read_note", "fail", "pid"], timeout=WAIT_MS)
    assert json.loads(cache_file(paths).read_text(encoding="utf-8"))["version"] == 1


def test_a_remembered_tool_the_server_no_longer_offers_is_an_error_result_and_leaves(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    """The server changed under the same settings (an update): the call that starts it finds its tools anew."""
    gone = ToolSpec("shred", "Shred a note (a tool this server offered once).", {"type": "object"})
    server = McpServer(NOTES)
    try:
        listed = server.list_tools(30)
    finally:
        server.stop()
    ToolsCache(cache_file(paths)).put(NOTES, [*listed, gone])
    write_tools(paths, ToolsConfig(servers=(NOTES,)))
    call = ToolCall("call00092", "shred", {}, "{}")
    backend = ToolScriptBackend([Turn("Shredding.", [call]), Turn("It could not be shredded.")])
    w = make_window(lambda _ref: backend)
    load(qtbot, w, "tiny.gguf")
    qtbot.waitUntil(lambda: w.tools.registry.entry("notes/shred") is not None, timeout=WAIT_MS)
    w.tools.choices.set_tool_on("notes/shred", True)
    turns.send(qtbot, w, "Shred the todo note")
    turns.asking(qtbot, w)
    turns.press(qtbot, w, "Allow once")
    turns.idle(qtbot, w)
    result = backend.requests[1][-1]
    assert result.role == "tool" and "no longer offers" in result.content and "shred" in result.content
    assert "It could not be shredded." in turns.text_of(w)
    # its fresh list replaces the remembered one: the tool is no longer offered, the others are
    qtbot.waitUntil(lambda: w.tools.registry.entry("notes/shred") is None, timeout=WAIT_MS)
    assert w.tools.registry.entry("notes/add") is not None
    qtbot.waitUntil(lambda: cached_names(paths, NOTES) == ["add", "read_note", "fail", "pid"], timeout=WAIT_MS)


def test_stop_while_a_remembered_server_starts_for_a_call_ends_it_at_once(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths, probe: LoopProbe
) -> None:
    """The server worked last time (its tools are remembered); today it hangs at start: the call waits for
    it without freezing the window, and Stop ends the call (and the answer) without waiting for the start."""
    stuck = stdio_server("stuck", "hang.py", "--at-start", start_timeout_s=20)
    ToolsCache(cache_file(paths)).put(stuck, [ToolSpec("quick", "Answer at once.", {"type": "object"})])
    write_tools(paths, ToolsConfig(servers=(stuck,)))
    call = ToolCall("call00093", "quick", {}, "{}")
    backend = ToolScriptBackend([Turn("Asking it.", [call]), Turn("Never reached.")])
    w = make_window(lambda _ref: backend)
    load(qtbot, w, "tiny.gguf")
    qtbot.waitUntil(lambda: w.tools.registry.entry("stuck/quick") is not None, timeout=WAIT_MS)
    assert server_processes("hang.py") == []
    w.tools.choices.set_tool_on("stuck/quick", True)
    turns.send(qtbot, w, "Ask it")
    turns.asking(qtbot, w)
    probe.start()
    turns.press(qtbot, w, "Allow once")
    server = w.tools.manager.server("stuck")
    qtbot.waitUntil(lambda: "hanging before it starts" in server.stderr_text(), timeout=WAIT_MS)
    assert server.state == "starting"
    qtbot.mouseClick(w.composer.button, LEFT)  # Stop
    assert w.controller.tools.tasks.join(5)  # the call's worker came back without waiting for the start
    probe.stop()
    turns.idle(qtbot, w)
    assert len(backend.requests) == 1 and "Stopped" in turns.text_of(w)
    print(f"longest event-loop gap while the server hung at start for a call: {probe.longest_gap_ms:.1f} ms")
    # (≤ 50 ms is the budget: the GUI thread's own work between two beats; a shared CI core is noisy)
    assert probe.longest_busy_ms < 50 and probe.longest_gap_ms < 250, (probe.longest_busy_ms, probe.longest_gap_ms)
