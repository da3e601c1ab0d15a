"""Chat ▸ Delete all chats… in the real window (issue 19's privacy item): after a question that says it
cannot be undone and that backups keep their copies, every chat (the Trash included) is deleted for good
off the GUI thread, the open chat closes, and the text is gone from the database file's bytes."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.chat_list import organise
from ember_chat.app.shell.main_window import MainWindow

pytestmark = pytest.mark.usefixtures("nothing_blocks")


def _menu(w: MainWindow, text: str) -> None:
    chat_menu = next(a.menu() for a in w.menuBar().actions() if a.text().replace("&", "") == "Chat")
    next(a for a in chat_menu.actions() if a.text().replace("&", "") == text).trigger()


def test_delete_all_chats_asks_then_removes_every_chat_and_its_text_from_the_file(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    ids = []
    for title in ("Plans", "Diary", "Taxes"):
        conv = w.store.create_conversation(title)
        w.store.add_message(conv.id, "user", f"zebracorn secret about {title.lower()}")
        ids.append(conv.id)
    w.store.organise.trash_chats([ids[2]])
    w.chats.reload_conversations()
    w.chats.open_conversation(ids[0])
    qtbot.waitUntil(lambda: w.controller.conversation_id == ids[0], timeout=5000)

    _menu(w, "Delete all chats…")
    box = w.chats.chat_question
    assert box is not None and box.isVisible()
    assert "3 chats" in box.text() and "cannot be undone" in box.text() and "Backups" in box.text()
    box.reject()  # Cancel: nothing goes
    assert len(w.store.conversations()) == 2 and len(w.store.organise.trashed()) == 1
    qtbot.waitUntil(lambda: w.chats.chat_question is None, timeout=5000)

    _menu(w, "Delete all chats…")
    with qtbot.waitSignal(w.tasks.settled, timeout=20_000):
        next(b for b in w.chats.chat_question.buttons() if b.text() == "Delete all chats").click()
    assert w.store.conversations() == [] and w.store.organise.trashed() == []
    assert w.controller.conversation_id is None and w.conversations.chat_ids() == []
    assert "deleted for good" in w.banner.text()
    raw = w.store.path.read_bytes() + (
        w.store.path.with_name(w.store.path.name + "-wal").read_bytes()
        if w.store.path.with_name(w.store.path.name + "-wal").exists()
        else b""
    )
    assert b"zebracorn" not in raw.lower()


def test_delete_all_chats_with_no_chats_says_so(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    _menu(w, "Delete all chats…")
    assert w.chats.chat_question is None
    assert "no chats" in w.banner.text().lower()


def test_a_sweep_held_up_by_another_reader_is_finished_by_the_window_later(
    qtbot: QtBot, make_window: Callable[..., MainWindow], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another program reading the database (a backup being written, `ember-chat chats` in a terminal) holds
    a snapshot: the deleted words cannot leave the WAL yet; the window tries again until they have."""
    monkeypatch.setattr(organise, "SWEEP_RETRY_MS", 50)
    w = make_window()
    conv = w.store.create_conversation("Old")
    w.store.add_message(conv.id, "user", "quokkafruit confidential")
    w.store.organise.trash_chats([conv.id])
    w.chats.reload_conversations()
    reader = sqlite3.connect(w.store.path)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM messages").fetchone()  # a read snapshot, held
        w.chats.organise.empty_trash()
        # every cache goes, the other chats' too (one can hold several chats' words): the question says so
        assert "your other chats' included" in w.chats.chat_question.text()
        with qtbot.waitSignal(w.tasks.settled, timeout=20_000):
            next(b for b in w.chats.chat_question.buttons() if b.text() == "Empty Trash").click()
        assert w.store.organise.sweep_pending  # the reader held it up
    finally:
        reader.close()
    qtbot.waitUntil(lambda: not w.store.organise.sweep_pending, timeout=10_000)
    wal = w.store.path.with_name(w.store.path.name + "-wal")
    raw = w.store.path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    assert b"quokkafruit" not in raw.lower()


def test_the_list_waits_while_chats_are_deleted_for_good_and_a_gone_chat_opens_with_a_sentence(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """While Delete all chats runs on its thread the list takes no clicks; a chat that no longer exists
    (opened by a script or a stale row) is a sentence, not an exception in a slot."""
    w = make_window()
    ids = []
    for title in ("C0", "C1", "C2"):
        conv = w.store.create_conversation(title)
        w.store.add_message(conv.id, "user", "hello")
        ids.append(conv.id)
    w.chats.reload_conversations()
    with qtbot.waitSignal(w.tasks.settled, timeout=20_000):
        w.chats.organise.delete_all(confirmed=True)
        assert not w.conversations.isEnabled()  # (rows still listed until the task ends: not clickable)
    assert w.conversations.isEnabled() and w.conversations.chat_ids() == []
    w.chats.open_conversation(ids[0])
    assert w.controller.conversation_id is None
    assert "no longer exists" in w.banner.text()


def test_deleting_a_folder_closes_an_archived_chat_of_it_that_is_open(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    conv = w.store.create_conversation("Archived one")
    w.store.add_message(conv.id, "user", "hello")
    work = w.store.organise.create_folder("Work")
    w.chats.organise.move([conv.id], work.id)
    w.chats.organise.archive([conv.id])
    w.chats.show_view("archived")
    w.chats.open_conversation(conv.id)
    qtbot.waitUntil(lambda: w.controller.conversation_id == conv.id, timeout=5000)
    w.chats.show_view("chats")
    w.chats.organise.delete_folder(work.id)
    assert w.store.conversation(conv.id).deleted_at is not None
    assert w.controller.conversation_id is None  # (it stayed open, in the Trash, and could be chatted in)


def test_in_the_trash_view_the_chat_menu_never_moves_a_trashed_chat_to_the_trash_again(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    conv = w.store.create_conversation("Old")
    w.store.organise.trash_chats([conv.id])
    trashed_at = w.store.conversation(conv.id).deleted_at
    w.chats.show_view("trash")
    index = w.conversations.index_of(conv.id)
    w.conversations.list.setCurrentIndex(index)
    w.chats.delete_current()  # Chat ▸ Delete chat… (Ctrl+Shift+Backspace) in the Trash: for good, after a question
    box = w.chats.chat_question
    assert box is not None and "for good" in box.text()
    box.reject()
    assert w.store.conversation(conv.id).deleted_at == trashed_at  # (its 30 days did not start again)
    assert w.chats.chosen_chats() == []  # Move to, Pin, Archive: nothing to act on in the Trash
