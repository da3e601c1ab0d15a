"""Shared by the window tests that need no model of test_app's: a window whose Model Manager talks to
the test's own Hub (the `window` fixture, which needs a `hub` fixture in the test module), and the
window's local API server turned on as a user does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.main import build_window
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.hub_server import FakeHub
from tests.helpers.peer_servers import free_port


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


def start_api_in_window(qtbot: QtBot, w: MainWindow) -> str:
    """Settings ▸ Local API server: turned on at a free port and applied (which succeeds); its URL."""
    dialog = w.api.open_dialog()
    dialog.enabled.setChecked(True)
    dialog.port.setValue(free_port())
    with qtbot.waitSignal(dialog.applied, timeout=10_000) as applied:
        dialog.apply()
    assert applied.args == [True]
    dialog.close()
    return w.api.server.url
