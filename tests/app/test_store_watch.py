"""The window notices chats another process wrote to its store (issue 28): `ember-chat chats import FILE`
(the installed entry point) run while the window is open on the same data folder added a chat the
window's list never showed until something in the window reloaded it. The list now shows it by itself,
and the selection, the open chat and the message box's draft stay as they were; `chats rm` (to the
Trash) is noticed the same way."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.chat_list.model import TRASH
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.backups_window import _open
from tests.helpers.chats_cli import cli
from tests.helpers.paths import TESTS


@pytest.fixture
def paths(chats_paths: AppPaths) -> AppPaths:
    """A data folder whose chat database holds two chats: tests/app/conftest.py's chats_paths."""
    return chats_paths


HOSTILE = TESTS / "hostile"
WAIT_MS = 10_000
LEFT = Qt.MouseButton.LeftButton


def _titles(w: MainWindow) -> list[str]:
    return [w.store.conversation(cid).title for cid in w.conversations.chat_ids()]


def _active(qtbot: QtBot, w: MainWindow) -> None:
    w.activateWindow()
    qtbot.waitUntil(w.isActiveWindow, timeout=WAIT_MS)


def test_a_chat_imported_on_the_command_line_appears_in_the_open_window(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    w = _open(qtbot, paths, windows)
    _active(qtbot, w)
    herons = next(c.id for c in w.store.conversations() if c.title == "Herons")
    w.chats.open_conversation(herons)
    w.composer.editor.setPlainText("A draft about herons, half written")
    assert sorted(_titles(w)) == ["Herons", "Owls"]

    out = cli(paths.data_dir, "import", str(HOSTILE / "chat_export_grants_consent.json"))
    assert out.returncode == 0, out.stderr
    qtbot.waitUntil(lambda: "Look at my notes" in _titles(w), timeout=WAIT_MS)
    assert w.controller.conversation_id == herons and w.conversations.selected_ids() == [herons]
    assert w.composer.editor.toPlainText() == "A draft about herons, half written"
    assert "Herons are birds." in w.transcript.plain_text()


def test_a_chat_moved_to_the_trash_on_the_command_line_leaves_the_list_and_a_selection_of_two_stays(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    w = _open(qtbot, paths, windows)
    _active(qtbot, w)
    out = cli(paths.data_dir, "import", str(HOSTILE / "chat_export_bad_settings.json"))
    assert out.returncode == 0, out.stderr
    qtbot.waitUntil(lambda: "Odd settings" in _titles(w), timeout=WAIT_MS)
    ids = {w.store.conversation(cid).title: cid for cid in w.conversations.chat_ids()}
    lst = w.conversations.list
    qtbot.mouseClick(lst.viewport(), LEFT, pos=lst.visualRect(w.conversations.index_of(ids["Herons"])).center())
    ctrl = lst.visualRect(w.conversations.index_of(ids["Owls"])).center()
    qtbot.mouseClick(lst.viewport(), LEFT, Qt.KeyboardModifier.ControlModifier, ctrl)
    two = sorted([ids["Herons"], ids["Owls"]])
    assert sorted(w.conversations.selected_ids()) == two and w.controller.conversation_id == ids["Herons"]

    out = cli(paths.data_dir, "rm", str(ids["Odd settings"]))
    assert out.returncode == 0, out.stderr
    qtbot.waitUntil(lambda: "Odd settings" not in _titles(w), timeout=WAIT_MS)
    assert w.conversations.model.text(TRASH) == "Trash (1)"
    assert sorted(w.conversations.selected_ids()) == two and w.controller.conversation_id == ids["Herons"]


def test_the_open_chat_moved_to_the_trash_on_the_command_line_closes_saying_why(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    """Review of issue 28: the open chat sent to the Trash by `ember-chat chats rm` left the list but stayed
    on screen, and a message sent then was saved into a chat in the Trash (gone for good in 30 days)."""
    w = _open(qtbot, paths, windows)
    _active(qtbot, w)
    herons = next(c.id for c in w.store.conversations() if c.title == "Herons")
    w.chats.open_conversation(herons)
    w.composer.editor.setPlainText("A question about herons, half written")

    out = cli(paths.data_dir, "rm", str(herons))
    assert out.returncode == 0, out.stderr
    qtbot.waitUntil(lambda: w.controller.conversation_id is None, timeout=WAIT_MS)
    assert "Herons" not in _titles(w) and "Herons are birds." not in w.transcript.plain_text()
    assert w.banner.isVisible() and "“Herons” was moved to the Trash by another program" in w.banner.text()
    assert w.composer.editor.toPlainText() == "A question about herons, half written"
    assert w.store.organise.trash_count() == 1 and len(w.store.thread(herons)) == 2  # (nothing added to it)
