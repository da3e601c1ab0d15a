"""Banners belong to the chat that raised them (issue 28, item 7), and an import says where its chats
went (item 10). A password-protected PDF's error in one chat stayed over the next one; "The backup was
restored…" and "Imported 1 chat…" stayed across chat switches; a chat archived when it was exported
came in silently into Archived, an unmarked duplicate of the one already there. Now what is about the
chat on screen goes when another chat opens, what is about the app (no model loaded) stays, and the
import's banner says "into Archived" and "a copy of a chat you already have", with *Open*.

The real window over a real SQLite file (test_backups_window's two chats), File ▸ Import with a file
written by Ember's own export, a real encrypted PDF, Settings ▸ Backups… ▸ Restore."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.backups.dialog import DAILY_KEY
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.export import chats_as_json
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.attachment_files import write_encrypted_pdf
from tests.helpers.backups_window import _dialog, _open, _restore_row
from tests.helpers.cli import cli
from tests.helpers.import_window import choose


@pytest.fixture
def paths(chats_paths: AppPaths) -> AppPaths:
    """A data folder whose chat database holds two chats: tests/app/conftest.py's chats_paths."""
    return chats_paths


WAIT_MS = 20_000


def _chats(w: MainWindow) -> tuple[int, int]:
    herons, owls = sorted(c.id for c in w.store.conversations())
    return herons, owls


def test_a_chats_file_error_goes_when_another_chat_opens_and_the_apps_message_stays(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow], tmp_path: Path
) -> None:
    w = _open(qtbot, paths, windows)
    herons, owls = _chats(w)
    w.chats.open_conversation(herons)
    locked = write_encrypted_pdf(tmp_path / "locked.pdf", ["The secret is behind the password."])
    with qtbot.waitSignal(w.composer.attachments.failed, timeout=WAIT_MS):
        w.composer.attach_paths([locked])
    assert w.banner.isVisible() and "password" in w.banner.text()
    w.chats.open_conversation(owls)
    assert not w.banner.isVisible()  # it was about Herons' message box, not about Owls
    w.chats.open_conversation(herons)
    assert not w.banner.isVisible()  # (dismissed, not brought back: the chip is gone)
    # the app's own message: no model is loaded, whichever chat is open
    w.composer.editor.setPlainText("hello?")
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    assert w.banner.isVisible() and "No model is loaded" in w.banner.text()
    w.chats.open_conversation(owls)
    assert w.banner.isVisible() and "No model is loaded" in w.banner.text()
    w.chats.new_chat()
    assert w.banner.isVisible() and "No model is loaded" in w.banner.text()


def test_the_restore_banner_goes_when_a_chat_opens(qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]) -> None:
    w = _open(qtbot, paths, windows)
    qtbot.waitUntil(lambda: not w.tasks.pending(DAILY_KEY))
    dialog = _dialog(qtbot, w)
    _restore_row(qtbot, w, dialog, 0)
    dialog.close()
    assert w.banner.isVisible() and "The backup was restored" in w.banner.text()
    w.chats.open_conversation(_chats(w)[1])
    assert not w.banner.isVisible()


def test_an_archived_chat_comes_in_archived_said_so_with_open_and_a_second_import_is_a_copy(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow], tmp_path: Path
) -> None:
    w = _open(qtbot, paths, windows)
    herons, owls = _chats(w)
    w.store.organise.archive_chats([owls], True)  # archived, then exported (the user's own export)
    exported = tmp_path / "owls.json"
    exported.write_text(chats_as_json(w.store, [owls]), encoding="utf-8")
    w.store.delete_conversation(owls)  # gone here: the file brings it back
    w.chats.reload_conversations()
    w.chats.open_conversation(herons)

    importer = choose(qtbot, w, exported)
    with qtbot.waitSignal(importer.finished, timeout=WAIT_MS) as done:
        pass
    (chat,) = done.args[0].imported
    assert chat.archived and chat.copy_of is None
    said = w.banner.text()
    assert said.startswith("Imported 1 chat (2 messages) from owls.json.") and "into Archived" in said
    assert "copy" not in said
    assert chat.id not in w.conversations.chat_ids()  # (not in the chat list: in Archived)
    button = w.banner.action_button
    assert button.isVisible() and button.text() == "Open" and "Owls" in button.toolTip()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert w.controller.conversation_id == chat.id and w.conversations.mode == "archived"
    assert chat.id in w.conversations.chat_ids() and w.conversations.current_id() == chat.id
    assert "Owls are birds." in w.transcript.plain_text()
    assert not w.banner.isVisible()  # the import's banner went with the switch to the chat it opened

    importer = choose(qtbot, w, exported)  # the same file again
    with qtbot.waitSignal(importer.finished, timeout=WAIT_MS) as done:
        pass
    (again,) = done.args[0].imported
    assert again.copy_of == chat.id and again.archived
    assert "It is a copy of a chat you already have." in w.banner.text() and "into Archived" in w.banner.text()
    assert w.banner.action_button.isVisible()
    w.chats.show_view("chats")
    w.chats.open_conversation(herons)
    assert not w.banner.isVisible() and not w.banner.action_button.isVisible()  # "Imported…" went


def test_several_chats_say_how_many_went_into_archived_and_which_are_copies(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow], tmp_path: Path
) -> None:
    w = _open(qtbot, paths, windows)
    herons, owls = _chats(w)
    w.store.organise.archive_chats([owls], True)
    both = tmp_path / "both.json"
    both.write_text(chats_as_json(w.store, [herons, owls]), encoding="utf-8")
    importer = choose(qtbot, w, both)
    with qtbot.waitSignal(importer.finished, timeout=WAIT_MS) as done:
        pass
    report = done.args[0]
    assert [(c.title, c.archived, c.copy_of) for c in report.imported] == [
        ("Herons", False, herons),
        ("Owls", True, owls),
    ]
    said = w.banner.text()
    assert "1 of them went into Archived" in said and "2 of them are copies of chats you already have" in said
    button = w.banner.action_button
    assert button.isVisible() and button.text() == "Show Archived"
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert w.conversations.mode == "archived" and report.imported[1].id in w.conversations.chat_ids()


def test_chats_import_on_the_command_line_says_archived_and_copy(paths: AppPaths, tmp_path: Path) -> None:
    store = ConversationStore(paths.database)
    try:
        owls = next(c.id for c in store.conversations() if c.title == "Owls")
        store.organise.archive_chats([owls], True)
        exported = tmp_path / "owls.json"
        exported.write_text(chats_as_json(store, [owls]), encoding="utf-8")
    finally:
        store.close()
    out = cli("chats", "import", str(exported), data_dir=paths.data_dir)
    assert out.returncode == 0, out.stderr
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("Chat ")]
    assert "“Owls”: into Archived" in line and f"a copy of chat {owls}, which you already have" in line
