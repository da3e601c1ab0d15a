"""A chat's title never disguises itself with bidi controls: a rename, an import or a first message with a
right-to-left override (U+202E) or an isolate is kept without it, and a title stored so before is shown
without it in the chat list (row and tooltip), a search hit and the Trash. Real
window, real chat database."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.export import chats_as_json
from ember_chat.engine.storage.import_plan import PlannedChat
from ember_chat.engine.storage.importing import import_chats
from ember_chat.engine.storage.titles import clean_title, title_from_message
from tests.helpers.chat_list import _chats, _click

pytestmark = pytest.mark.usefixtures("nothing_blocks")

HOSTILE = 'Q/A: "gate"?*<code>|\\ \u202eevil.exe  ..'
SHOWN = 'Q/A: "gate"?*<code>|\\ evil.exe  ..'
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def test_a_renamed_title_is_kept_and_shown_without_its_override(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    (cid,) = _chats(w, ["Plans"])
    w.chats.rename_chat(cid, HOSTILE)
    assert w.store.conversation(cid).title == SHOWN
    assert w.conversations.row_texts()[0] == SHOWN
    tip = w.conversations.index_of(cid).data(Qt.ItemDataRole.ToolTipRole)
    assert not tip or "\u202e" not in tip


def test_a_title_stored_with_bidi_controls_is_shown_without_them_everywhere(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    a, b = _chats(w, ["Alpha", "Beta"])
    w.store.add_message(a, "user", "where do herons nest")
    with sqlite3.connect(w.store.path) as db:  # (as a title was kept before: an import, a model's title)
        db.execute("UPDATE conversations SET title = ? WHERE id = ?", (f"report{BIDI}\u202egpj.exe", a))
    db.close()
    w.chats.reload_conversations()
    shown = "reportgpj.exe"
    assert shown in w.conversations.row_texts()
    assert all(ch not in text for text in w.conversations.row_texts() for ch in BIDI)
    tip = w.conversations.index_of(a).data(Qt.ItemDataRole.ToolTipRole)
    assert not tip or all(ch not in tip for ch in BIDI)
    _click(qtbot, w, a)

    lst = w.conversations
    with qtbot.waitSignal(lst.search_changed, timeout=5000):
        lst.search.setText("herons")
    assert any(text.startswith(shown) for text in lst.row_texts()), lst.row_texts()
    assert all(ch not in text for text in lst.row_texts() for ch in BIDI)
    with qtbot.waitSignal(lst.search_changed, timeout=5000):
        lst.search.setText("")

    w.chats.organise.trash([a])
    w.chats.show_view("trash")
    tip = w.conversations.index_of(a).data(Qt.ItemDataRole.ToolTipRole)
    assert tip.startswith(f"{shown} — in the Trash since ")
    assert shown in w.conversations.row_texts()
    assert b not in w.conversations.chat_ids()


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("a\u202egpj.exe", "agpj.exe"),
        ("\u2067مرحبا\u2069 notes", "مرحبا notes"),
        ("plain title", "plain title"),
        ("\u202e\u202c", "Chat"),  # (nothing left that shows)
        ("👨\u200d👩\u200d👧 family", "👨\u200d👩\u200d👧 family"),  # (joiners that spell an emoji stay)
        ("🏳\ufe0f\u200d🌈 Pride", "🏳\ufe0f\u200d🌈 Pride"),  # (after the emoji presentation selector too)
        ("❤\ufe0f\u200d🔥", "❤\ufe0f\u200d🔥"),
        ("ශ්\u200dරී", "ශ්\u200dරී"),  # (after a virama: Sinhala's Sri)
        ("क्\u200dष", "क्\u200dष"),
        ("a\u200d b", "a b"),  # (before a space: nothing joined)
        ("", ""),
    ],
)
def test_clean_title(given: str, kept: str) -> None:
    assert clean_title(given) == kept


def test_a_first_message_with_an_override_makes_a_title_without_it() -> None:
    assert title_from_message("open \u202eexe.txt please") == "open exe.txt please"


def test_an_imported_chat_is_planned_with_its_title_clean() -> None:
    planned = PlannedChat(title=HOSTILE, created_at=0.0, updated_at=0.0, messages=[], active=None)
    assert planned.title == SHOWN


def test_a_chat_stored_with_a_mark_in_its_title_and_imported_back_is_known_as_a_copy(tmp_path: Path) -> None:
    """Its title stored before titles were cleaned ('Notes\u200f'), its export's title planned clean: the
    copy is still found (the stored title compared as it is shown)."""
    store = ConversationStore(tmp_path / "chats.sqlite3")
    try:
        chat = store.create_conversation("Notes")
        store.add_message(chat.id, "user", "Herons wait in shallow water.")
        with sqlite3.connect(store.path) as db:
            db.execute("UPDATE conversations SET title = ? WHERE id = ?", ("Notes\u200f", chat.id))
        exported = tmp_path / "chats.json"
        exported.write_text(chats_as_json(store, [chat.id]))
        assert import_chats(store, exported).copies == 1
    finally:
        store.close()
