"""The chat list's light reading of the store (issue 19's 50 ms budget at 5,000 chats): `chat_rows` gives
what the list shows of each chat (no params JSON, no system prompt), in the order and with the filter of
`conversations()`, and the Archived and Trash counts are counted by SQLite, on a real SQLite file."""

from __future__ import annotations

from pathlib import Path

from ember_chat.engine.storage.conversations import ChatRow, ConversationStore
from tests.helpers.clock import Clock


def test_chat_rows_are_the_listed_chats_light_and_in_the_same_order(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path / "chats.sqlite3", clock=Clock())
    try:
        ids = [store.create_conversation(f"Chat {i}", params={"temperature": 0.5}).id for i in range(6)]
        folder = store.organise.create_folder("Work")
        store.organise.move_chats([ids[1], ids[2]], folder.id)
        store.organise.set_pinned([ids[3]], True)
        store.organise.archive_chats([ids[4]], True)
        store.organise.trash_chats([ids[5]])
        store.add_message(ids[0], "user", "newest activity")
        rows = store.chat_rows()
        full = store.conversations()
        assert [r.id for r in rows] == [c.id for c in full] == [ids[0], ids[3], ids[2], ids[1]]
        assert all(isinstance(r, ChatRow) for r in rows)
        assert [(r.title, r.folder_id, r.pinned, r.archived_at, r.updated_at) for r in rows] == [
            (c.title, c.folder_id, c.pinned, c.archived_at, c.updated_at) for c in full
        ]
        assert rows[1].pinned is True and rows[0].pinned is False
        assert [r.id for r in store.chat_rows([ids[2], ids[4], ids[5], ids[0], 9999])] == [ids[0], ids[2]]
        assert store.chat_rows([]) == []
        assert store.archived_count() == 1
        assert store.organise.trash_count() == 1
    finally:
        store.close()
