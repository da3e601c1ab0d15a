"""The GUI thread never waits (continued from app/test_gui_never_waits.py): on the keychain (the Hub token
when searching, the API server's key, a connection's key), on a connection test or a download stuck at
close; the window's API server with a keychain that cannot be read refuses to start only when the user
set a key. Each blocking part hangs on an Event (for at most HANG_S)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import keyring
import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.errors import DownloadStopped
from ember_chat.engine.inference.remote import wire as openai_wire
from ember_chat.engine.models.download_queue import DownloadQueue
from ember_chat.engine.models.downloader import DownloadSpec
from ember_chat.engine.storage.connections import Connection
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.secrets import API_SERVER_KEY, SecretStore
from ember_chat.engine.storage.settings import Settings, SettingsFile
from tests.helpers.file_keyring import UnreadableKeyring
from tests.helpers.never_waits import (
    HANG_S,
    PROMPT_S,
    WAIT_MS,
    HangingKeyring,
    Heartbeat,
    closed_cleanly,
    free_port,
    timed,
)

pytestmark = pytest.mark.usefixtures("every_task_thread_ends", "no_api_server_key")


def test_a_search_does_not_wait_for_the_keychain(
    qtbot: QtBot,
    make_window: Callable[..., MainWindow],
    hung_keychain: HangingKeyring,
    heartbeat: Heartbeat,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Hub client reads the token from the keychain: it is made on the task's thread."""
    monkeypatch.setenv("EMBER_HF_ENDPOINT", "http://127.0.0.1:9")  # no Hub: the search fails at once
    w = make_window()
    mm = w.models.model_manager()
    mm.search_box.setText("tiny")
    assert timed(mm.search) < PROMPT_S
    assert hung_keychain.entered.wait(10)
    heartbeat.keeps_beating(qtbot)
    assert timed(lambda: mm.set_token("hf_secret")) < PROMPT_S  # saving the token does not wait either
    with qtbot.waitSignal(mm.token_saved, timeout=WAIT_MS):
        hung_keychain.release.set()
    assert "Token saved" in mm.discover_status.text()
    closed_cleanly(w)


def test_the_api_server_starts_without_the_gui_waiting_for_the_keychain(
    qtbot: QtBot, paths: AppPaths, make_window: Callable[..., MainWindow], hung_keychain: HangingKeyring
) -> None:
    SettingsFile(paths.settings_file).save(Settings(api_server=True, api_port=free_port()))
    made: list[MainWindow] = []
    assert timed(lambda: made.append(make_window())) < 5 * PROMPT_S  # (the window itself takes a moment)
    w = made[0]
    assert hung_keychain.entered.wait(10) and not w.api.running
    dialog_made: list[object] = []
    assert timed(lambda: dialog_made.append(w.api.open_dialog())) < PROMPT_S
    dialog = dialog_made[0]
    assert "checking" in dialog.key.placeholderText()
    with qtbot.waitSignal(w.api.applied, timeout=WAIT_MS) as started:
        hung_keychain.release.set()
    assert started.args == [True] and w.api.running
    qtbot.waitUntil(lambda: dialog.key.placeholderText() == "none", timeout=WAIT_MS)
    closed_cleanly(w)


def test_selecting_and_testing_a_connection_does_not_wait_for_the_keychain(
    qtbot: QtBot, make_window: Callable[..., MainWindow], hung_keychain: HangingKeyring, heartbeat: Heartbeat
) -> None:
    w = make_window()
    hung_keychain.release.set()
    w.connections.save(Connection("lab", "http://127.0.0.1:9/v1", "m"), api_key="k")
    hung_keychain.release.clear()
    hung_keychain.entered.clear()
    w.models.open_connections()
    d = w.models.connections_dialog
    assert timed(lambda: d.list.setCurrentRow(0)) < PROMPT_S  # is a key stored? asked off the GUI thread
    assert hung_keychain.entered.wait(10)
    assert "checking" in d.key.placeholderText()
    assert timed(d.test_connection) < PROMPT_S  # the stored key is read on the test's thread
    heartbeat.keeps_beating(qtbot)
    with qtbot.waitSignal(d.tested, timeout=WAIT_MS):
        hung_keychain.release.set()
    qtbot.waitUntil(lambda: d.key.placeholderText() == "stored in the system keychain", timeout=WAIT_MS)
    assert "refused" in d.result.text()  # nothing listens on port 9
    d.close()
    closed_cleanly(w)


# ----- joins on close


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A server that accepts connections (the kernel does) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def test_closing_while_a_connection_test_hangs_returns_at_once(
    qtbot: QtBot, make_window: Callable[..., MainWindow], silent_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    waiting = threading.Event()
    real_get_json = openai_wire.get_json

    def get_json(*args: Any, **kwargs: Any) -> Any:
        waiting.set()
        return real_get_json(*args, **kwargs)

    monkeypatch.setattr(openai_wire, "get_json", get_json)
    w = make_window()
    w.models.open_connections()
    d = w.models.connections_dialog
    d.name.setText("silent")
    d.url.setText(silent_server)
    d.timeout.setValue(30)  # the test would wait this long for the server
    d.test_connection()
    assert waiting.wait(10)
    assert timed(d.close) < PROMPT_S
    assert d.tasks.join(10)  # the test was interrupted: its connection was shut down, not timed out
    d.show()
    waiting.clear()
    d.test_connection()  # again, and this time the window closes while it waits
    assert waiting.wait(10)
    assert timed(w.close) < PROMPT_S
    assert w.join_background(10)


def test_closing_while_a_download_is_stuck_returns_at_once(
    qtbot: QtBot, make_window: Callable[..., MainWindow], release: threading.Event
) -> None:
    entered = threading.Event()

    class StuckDownloader:
        """A transfer stuck in a read: it sees the pause only when the read returns."""

        def fetch(self, spec: DownloadSpec, models_dir: Path, **_: object) -> Path:
            entered.set()
            release.wait(HANG_S)
            raise DownloadStopped("Download paused.", cancelled=False)

    w = make_window()
    w.downloads = DownloadQueue(StuckDownloader, w.library.models_dir)
    w.downloads.add(DownloadSpec("acme/x", "x.gguf", size=10))
    assert entered.wait(10)
    assert timed(w.close) < PROMPT_S
    release.set()
    assert w.join_background(10)
    assert [j.state for j in w.downloads.snapshot()] == ["paused"]


# ----- the API server with a keychain that cannot be read


def test_no_key_set_and_an_unreadable_keychain_starts_the_server(
    qtbot: QtBot, make_window: Callable[..., MainWindow], unreadable_keychain: None
) -> None:
    w = make_window()
    assert not w.settings.api_key_set
    dialog = w.api.open_dialog()
    with qtbot.waitSignal(dialog.key_checked, timeout=WAIT_MS):
        pass
    assert "cannot be read" in dialog.key.placeholderText()
    dialog.enabled.setChecked(True)
    dialog.port.setValue(free_port())
    with qtbot.waitSignal(dialog.applied, timeout=WAIT_MS) as applied:
        dialog.apply()
    assert applied.args == [True] and w.api.running
    assert w.api.server.url.startswith("http://127.0.0.1:")  # loopback only, as without a key
    assert not w.banner.isVisible()
    closed_cleanly(w)


def test_a_key_set_and_an_unreadable_keychain_refuses_to_start(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    w = make_window()
    dialog = w.api.open_dialog()
    dialog.key.setText("the-key")
    with qtbot.waitSignal(dialog.applied, timeout=WAIT_MS) as applied:
        dialog.apply()  # the server stays off; the key is stored, and the settings say so
    assert applied.args == [True] and not w.api.running
    assert w.settings.api_key_set and SettingsFile(paths.settings_file).load().api_key_set
    assert "the-key" not in paths.settings_file.read_text()
    previous = keyring.get_keyring()
    keyring.set_keyring(UnreadableKeyring())
    try:
        dialog.enabled.setChecked(True)
        port = free_port()
        dialog.port.setValue(port)
        with qtbot.waitSignal(dialog.applied, timeout=WAIT_MS) as applied:
            dialog.apply()
        assert applied.args == [False] and not w.api.running
        banner = w.banner.text()
        assert "keychain could not be read" in banner and "was not started" in banner
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        keyring.set_keyring(previous)
    # removing the key clears the flag
    dialog.remove_key.setChecked(True)
    with qtbot.waitSignal(dialog.applied, timeout=WAIT_MS):
        dialog.apply()
    assert not w.settings.api_key_set and SecretStore().get(API_SERVER_KEY) is None
    closed_cleanly(w)
