"""Fixtures shared by the window tests (tests/app/): a data folder with the tiny model, windows closed and joined at
teardown, and the fixtures of the features' test families."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import keyring
import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.main import build_window
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.core.tools import ToolResult
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.secrets import API_SERVER_KEY
from tests.helpers.attachments_window import WAIT_MS
from tests.helpers.backups_window import ADD
from tests.helpers.chat_list import BLOCKED_MS
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.file_keyring import FileTestKeyring, UnreadableKeyring
from tests.helpers.gguf_factory import TinySpec, any_of, says, write_tiny_model
from tests.helpers.hub_server import FakeHub
from tests.helpers.never_waits import HangingKeyring, Heartbeat
from tests.helpers.presets_support import LOAD_TIMEOUT
from tests.helpers.sse_server import FakeOpenAI, chunk
from tests.helpers.tool_script import ToolScriptBackend
from tests.helpers.tool_turns import WAIT_MS as TOOL_TURN_WAIT_MS
from tests.helpers.tools_window_support import LoopProbe


@pytest.fixture
def nothing_blocks() -> Iterator[list[str]]:
    """A menu or dialog that blocks (exec) is closed after BLOCKED_MS and the test fails, instead of
    hanging until the suite's timeout."""
    blocked: list[str] = []

    def close_blocking() -> None:
        for widget in (QApplication.activePopupWidget(), QApplication.activeModalWidget()):
            if widget is not None:
                blocked.append(type(widget).__name__)
                widget.close()

    watchdog = QTimer()
    watchdog.setInterval(BLOCKED_MS)
    watchdog.timeout.connect(close_blocking)
    watchdog.start()
    yield blocked
    watchdog.stop()
    assert not blocked, f"blocked the event loop: {blocked}"


@pytest.fixture
def every_task_thread_ends() -> Iterator[None]:
    """Teardown: every background thread the GUI started has ended (the hung calls were released)."""
    yield
    deadline = time.monotonic() + 15
    for t in threading.enumerate():
        if t.name.startswith("ember-task"):
            t.join(max(0.0, deadline - time.monotonic()))
    left = [t.name for t in threading.enumerate() if t.name.startswith("ember-task")]
    assert not left, left


@pytest.fixture
def no_api_server_key() -> Iterator[None]:
    """The test keychain is shared by the whole session: no API server key before or after a test."""
    FileTestKeyring().delete_password("ember-chat", API_SERVER_KEY)
    yield
    FileTestKeyring().delete_password("ember-chat", API_SERVER_KEY)


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """The event a hung call waits on; set at teardown whatever happened."""
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def heartbeat() -> Iterator[Heartbeat]:
    hb = Heartbeat()
    yield hb
    hb.timer.stop()


@pytest.fixture
def hung_keychain(release: threading.Event) -> Iterator[HangingKeyring]:
    previous = keyring.get_keyring()
    backend = HangingKeyring(release)
    keyring.set_keyring(backend)
    try:
        yield backend
    finally:
        release.set()
        keyring.set_keyring(previous)


@pytest.fixture
def unreadable_keychain() -> Iterator[None]:
    previous = keyring.get_keyring()
    keyring.set_keyring(UnreadableKeyring())
    try:
        yield
    finally:
        keyring.set_keyring(previous)


@pytest.fixture
def chats_paths(tmp_path: Path) -> AppPaths:
    """A data folder whose chat database holds two chats (one with a tool call), as a user's would."""
    p = AppPaths(tmp_path / "data", tmp_path / "config")
    store = ConversationStore(p.database)
    for title in ("Herons", "Owls"):
        conv = store.create_conversation(title)
        q = store.add_message(conv.id, "user", f"Tell me about {title.lower()}.")
        a = store.add_message(conv.id, "assistant", f"{title} are birds.", parent_id=q.id)
    store.set_tool_calls(a.id, [ADD])
    store.set_tool_result(a.id, ToolResult(ADD.id, ADD.name, "5"), source="Built-in", decision="once")
    store.close()
    return p


@pytest.fixture
def windows(qtbot: QtBot, paths: AppPaths) -> Iterator[list[MainWindow]]:
    made: list[MainWindow] = []
    yield made
    for w in made:
        w.close()
        assert w.join_background(30)
        w.store.close()


@pytest.fixture
def bare_paths(tmp_path: Path) -> AppPaths:
    return AppPaths(tmp_path / "data", tmp_path / "config")


@pytest.fixture
def window_list(qtbot: QtBot) -> Iterator[list[MainWindow]]:
    made: list[MainWindow] = []
    yield made
    for w in made:
        w.close()
        assert w.join_background(30)
        w.store.close()


@pytest.fixture
def endless_models_paths(tmp_path: Path) -> AppPaths:
    """Two tiny models in the models folder that never end on their own (readable words, up to the
    token limit): one says the same sentence again and again, the other any of a few words."""
    p = AppPaths(tmp_path / "data", tmp_path / "config")
    p.default_models_dir.mkdir(parents=True)
    same = says("▁hello", "▁world", "▁and", "▁you", ".")
    write_tiny_model(p.default_models_dir / "tiny.gguf", TinySpec(script=same, name="Tiny Same"))
    words = any_of("▁hello", "▁world", "▁Ember", "▁the", "!")
    write_tiny_model(p.default_models_dir / "other.gguf", TinySpec(script=words, name="Tiny Words"))
    return p


@pytest.fixture
def peer() -> Iterator[FakeOpenAI]:
    """A remote server whose every answer is one chunk, then nothing: a run with it never ends by itself
    (two tiny local models answer thousands of tokens a second: a run of them can end before a test acts)."""
    with FakeOpenAI() as fake:
        fake.stream([chunk("Once", role="assistant"), chunk(" upon")], stall_after=1)
        yield fake


@pytest.fixture
def two_models_paths(tmp_path: Path, tiny_model: Path) -> AppPaths:
    p = AppPaths(tmp_path / "data", tmp_path / "config")
    p.default_models_dir.mkdir(parents=True)
    shutil.copy(tiny_model, p.default_models_dir / "tiny.gguf")
    shutil.copy(tiny_model, p.default_models_dir / "other.gguf")
    return p


@pytest.fixture
def make_presets_window(qtbot: QtBot, paths: AppPaths) -> Iterator[Callable[[], MainWindow]]:
    windows: list[MainWindow] = []

    def make() -> MainWindow:
        w = build_window(paths)
        qtbot.addWidget(w)
        w.show()
        windows.append(w)
        with qtbot.waitSignal(w.models_listed, timeout=LOAD_TIMEOUT):
            pass
        return w

    yield make
    for w in windows:
        w.close()
        if w.api.quit_question is not None:
            w.api.quit_button.click()
        assert w.join_background(30)
        w.store.close()


@pytest.fixture
def make_loaded_window(
    qtbot: QtBot, tmp_path: Path, tiny_model: Path
) -> Iterator[Callable[[FakeBackend | None], MainWindow]]:
    """A window with the tiny model loaded: through this fake engine, or (None) the real llama.cpp runtime."""
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    paths.default_models_dir.mkdir(parents=True)
    shutil.copy(tiny_model, paths.default_models_dir / "tiny.gguf")
    windows: list[MainWindow] = []

    def make(fake: FakeBackend | None, load: bool = True) -> MainWindow:
        w = build_window(paths, backend_factory=(lambda _ref: fake) if fake is not None else None)
        qtbot.addWidget(w)
        w.show()
        windows.append(w)
        with qtbot.waitSignal(w.models_listed, timeout=WAIT_MS):
            pass
        if not load:
            return w
        with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=WAIT_MS):
            w.models.load_model("tiny.gguf")
        return w

    yield make
    for w in windows:
        w.close()
        assert w.join_background(30)
        w.store.close()


@pytest.fixture
def window(qtbot: QtBot, tmp_path: Path, hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> Iterator[MainWindow]:
    """A new user's window (empty data and config under tmp_path) with the test module's `hub` as its Hub;
    closed at teardown, every background thread joined."""
    monkeypatch.setenv("EMBER_HF_ENDPOINT", hub.hub_url)
    w = build_window(AppPaths(tmp_path / "data", tmp_path / "config"))
    qtbot.addWidget(w)
    w.show()
    yield w
    w.close()
    assert w.join_background(30)
    w.store.close()


@pytest.fixture
def make_tool_script_window(qtbot: QtBot, tmp_path: Path, tiny_model: Path) -> Iterator[Callable[..., MainWindow]]:
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    paths.default_models_dir.mkdir(parents=True)
    shutil.copy(tiny_model, paths.default_models_dir / "tiny.gguf")
    windows: list[MainWindow] = []

    def make(backend: ToolScriptBackend) -> MainWindow:
        w = build_window(paths, backend_factory=lambda _ref: backend)
        qtbot.addWidget(w)
        w.resize(1100, 800)
        w.show()
        windows.append(w)
        with qtbot.waitSignal(w.models_listed, timeout=TOOL_TURN_WAIT_MS):
            pass
        with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=TOOL_TURN_WAIT_MS):
            w.models.load_model("tiny.gguf")
        return w

    yield make
    for w in windows:
        w.close()
        assert w.controller.tools.tasks.join(10)  # every call's worker thread has ended
        assert w.join_background(30)
        w.store.close()


@pytest.fixture
def probe() -> Iterator[LoopProbe]:
    p = LoopProbe()
    yield p
    p.stop()
