"""A restore asked for while an answer streams (the real window, a fake engine that never ends, a real
SQLite file): the answer is stopped first and saved, then the backup is restored; the chat that
streamed is not left on screen, and it is in the copy set aside before the restore, with what was
answered so far."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from pytestqt.qtbot import QtBot

from ember_chat.app.backups.dialog import DAILY_KEY
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.window import start_endless_answer


def test_a_restore_while_an_answer_streams_stops_it_first_and_keeps_it_in_the_copy_set_aside(
    qtbot: QtBot, paths: AppPaths, make_window: Callable[..., MainWindow]
) -> None:
    seeded = ConversationStore(paths.database)
    kept = seeded.create_conversation("From the backup")
    seeded.add_message(kept.id, "user", "an older question")
    seeded.close()
    w = start_endless_answer(qtbot, make_window)  # a new chat whose answer streams
    qtbot.waitUntil(lambda: not w.tasks.pending(DAILY_KEY))
    (daily,) = w.backups.manager.backups()  # made at start: the older chat only
    streaming = w.controller.conversation_id
    assert w.controller.generating and streaming != kept.id

    dialog = w.backups.open_dialog()
    qtbot.waitUntil(lambda: dialog.table.rowCount() == 1)
    dialog.table.selectRow(0)
    dialog.restore.click()
    (yes,) = [b for b in dialog.question.buttons() if b.text() == "Restore"]
    with qtbot.waitSignal(w.backups.restored, timeout=20_000) as restored:
        yes.click()
    assert not w.controller.generating and w.controller.conversation_id is None
    assert w.conversations.chat_ids() == [kept.id] and daily.chats == 1
    aside = restored.args[0]
    db = sqlite3.connect(f"file:{aside.path}?mode=ro", uri=True)
    try:
        answer = db.execute(
            "SELECT content FROM messages WHERE conversation_id = ? AND role = 'assistant'", (streaming,)
        ).fetchone()[0]
    finally:
        db.close()
    assert answer.startswith("Ember streams")  # what was answered before the stop, saved in the copy
