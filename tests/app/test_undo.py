"""The window's undo (issue 19): a stack of the last changes (delete, move, pin, archive), undone newest
first by Chat ▸ Undo / Ctrl+Z or the banner's Undo link; the link goes with its message; an undo that
can no longer be done says why. Real window, real SQLite file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.chat_list import _chats


def _undo_action(w: MainWindow) -> object:
    chat_menu = next(a.menu() for a in w.menuBar().actions() if a.text() == "&Chat")
    return next(a for a in chat_menu.actions() if a.text() == "&Undo")


def test_changes_are_undone_newest_first(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    a, b, c = _chats(w, ["A", "B", "C"])
    work = w.store.organise.create_folder("Work")
    o = w.chats.organise
    o.move([a, b], work.id)
    o.pin([c], True)
    o.archive([b])
    o.trash([a])
    undo = _undo_action(w)
    assert undo.shortcut().toString() == "Ctrl+Z"

    state = lambda x: (lambda k: (k.folder_id, k.pinned, k.archived_at is not None, k.deleted_at is not None))(  # noqa: E731
        w.store.conversation(x)
    )
    assert [state(x) for x in (a, b, c)] == [(work.id, False, False, True), (work.id, False, True, False),
                                             (None, True, False, False)]  # fmt: skip
    undo.trigger()
    assert state(a) == (work.id, False, False, False) and w.banner.text() == "Undone: Moved “A” to the Trash."
    undo.trigger()
    assert state(b) == (work.id, False, False, False)
    undo.trigger()
    assert state(c) == (None, False, False, False)
    undo.trigger()
    assert state(a) == state(b) == (None, False, False, False)
    assert w.conversations.chat_ids() == [c, b, a]
    undo.trigger()
    assert w.banner.text() == "Nothing to undo." and not w.undo.link.isVisible()


def test_the_link_goes_with_its_message_and_a_refused_undo_says_why(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    a, b = _chats(w, ["Kept", "Purged"])
    w.chats.organise.trash([b])
    assert w.undo.link.isVisible()
    w.show_error("Something else happened.")  # another message: the link goes (it was about the Trash)
    assert not w.undo.link.isVisible()
    w.chats.organise.trash([a])
    assert w.undo.link.isVisible()
    w.banner.close_button.click()
    assert not w.undo.link.isVisible()

    w.store.organise.purge_chats([b])  # gone for good since (as Empty Trash does)
    w.undo.undo_last()  # a's
    assert w.store.conversation(a).deleted_at is None
    w.undo.undo_last()  # b's: can no longer be
    assert w.banner.isVisible() and w.banner.property("kind") == "error"
    assert "can no longer be undone" in w.banner.text() and "Error" not in w.banner.text()
    assert w.conversations.chat_ids() == [a]


def test_several_chats_export_as_one_json_file(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    w = make_window()
    a, b, _c = _chats(w, ["One", "Two", "Three"])
    w.chats.exports.export_many([a, b])
    dialog = w.chats.exports.export_dialog_open
    assert dialog is not None and dialog.isVisible() and dialog.selectedFiles()[0].endswith("2 chats.json")
    target = tmp_path / "two.json"
    dialog.selectFile(str(target))
    dialog.accept()
    data = json.loads(target.read_text(encoding="utf-8"))
    assert sorted(ch["title"] for ch in data) == ["One", "Two"]  # B's lossless chats_as_json: a list
    assert [m["content"] for m in data[0]["messages"]] == [f"question in {data[0]['title']}"]
    assert str(target) in w.banner.text()


def test_the_shortcuts_list_names_undo_and_the_lists_delete_key(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    w.show_shortcuts()
    rows = dict(w._shortcuts.rows())
    assert rows["Ctrl+Z"] == "Undo (Chat)"
    assert rows["Delete (in the chat list)"] == "Move the selected chats to the Trash (Ctrl+Z brings them back)"
    assert "Shift+click / Ctrl+click (in the chat list)" in rows
    w._shortcuts.close()


def test_what_was_done_leaves_the_banner_with_its_chat_and_ctrl_z_still_undoes_it(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """ "Moved … to the Trash." and "Undone: …" go when another chat is opened or a new one started (they stayed
    up across chats and theme changes); the change is still on the stack."""
    w = make_window()
    a, b, c = _chats(w, ["A", "B", "C"])
    w.chats.open_conversation(b)
    qtbot.waitUntil(lambda: w.controller.conversation_id == b, timeout=5000)
    w.chats.organise.trash([a])
    assert w.banner.isVisible() and w.undo.link.isVisible()
    w.chats.open_conversation(c)
    qtbot.waitUntil(lambda: w.controller.conversation_id == c, timeout=5000)
    assert not w.banner.isVisible() and not w.undo.link.isVisible()
    _undo_action(w).trigger()
    assert w.store.conversation(a).deleted_at is None
    assert w.banner.isVisible() and w.banner.text() == "Undone: Moved “A” to the Trash."
    w.chats.new_chat()
    qtbot.waitUntil(lambda: w.controller.conversation_id is None, timeout=5000)
    assert not w.banner.isVisible()
    w.show_error("A real problem.")  # (an error is not taken down by a new chat)
    w.chats.new_chat()
    assert w.banner.isVisible() and w.banner.text() == "A real problem."
