"""The privacy sweep: after chats are deleted for good, their words are nowhere in the raw bytes of the
database file or its WAL (messages, the full-text index, tool results, attachment passages), and the files
only they used are gone from the data folder. Real SQLite files, read as bytes while the store is open."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ember_chat.engine.attachments import AttachmentStore, read_attachment_bytes
from ember_chat.engine.core.tools import ToolCall, ToolResult
from ember_chat.engine.storage.backups import BackupManager
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.paths import AppPaths

SECRETS = ("Quuxbarnacle", "Zorblefrump", "Snickerwhomp", "Glimmerfax")  # message, tool, file, title


def raw(path: Path) -> bytes:
    """The .db file and its -wal, as bytes, lower-cased (the index keeps words lower-cased)."""
    wal = path.with_name(path.name + "-wal")
    return (path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")).lower()


def found(path: Path) -> set[str]:
    data = raw(path)
    return {s for s in SECRETS if s.lower().encode() in data}


def secret_chat(store: ConversationStore, atts: AttachmentStore) -> tuple[int, Path]:
    c = store.create_conversation(f"About {SECRETS[3]}", system_prompt="be brief")
    filler = " ".join(f"{SECRETS[0]} paragraph {i} of the private story." for i in range(300))
    u = store.add_message(c.id, "user", filler)
    note = atts.save(read_attachment_bytes("diary.md", f"# Diary\n\nDear diary, {SECRETS[2]} again.".encode()))
    atts.link(u.id, [note.id])
    a = store.add_message(c.id, "assistant", "let me compute", parent_id=u.id)
    call = ToolCall("call00001", "calculator", {"expression": "1+1"}, '{"expression": "1+1"}')
    store.set_tool_calls(a.id, [call])
    store.set_tool_result(a.id, ToolResult(call.id, "calculator", f"2 {SECRETS[1]}"), source="Built-in")
    return c.id, atts.blob_path(note.sha256)


@pytest.fixture
def setup(tmp_path: Path):
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    store = ConversationStore(paths.database)
    atts = AttachmentStore(paths, store)
    other = store.create_conversation("Keep me")
    store.add_message(other.id, "user", "an ordinary chat about the weather, kept")
    yield store, atts, paths.database
    store.close()


def test_emptying_the_trash_leaves_no_word_of_the_chat_in_the_files(setup) -> None:
    store, atts, db = setup
    cid, blob = secret_chat(store, atts)
    store.organise.trash_chats([cid])
    assert found(db) == set(SECRETS) and blob.exists()  # in the Trash: all still there (it can come back)
    assert store.organise.empty_trash() == 1
    assert found(db) == set()
    assert not blob.exists()
    assert b"ordinary chat about the weather" in raw(db)  # the other chat is untouched
    assert [h.conversation_id for h in store.search("weather")] == [store.conversations()[0].id]


def test_deleting_every_chat_leaves_no_word_of_them(setup) -> None:
    store, atts, db = setup
    secret_chat(store, atts)
    assert store.organise.delete_all_chats() == 2
    assert found(db) == set() and b"weather" not in raw(db)
    assert store.conversations() == [] and store.organise.trashed() == []


def test_a_file_another_chat_still_uses_is_kept(setup) -> None:
    store, atts, db = setup
    cid, blob = secret_chat(store, atts)
    other = store.create_conversation("Uses the diary too")
    m = store.add_message(other.id, "user", "see the diary")
    (att,) = atts.of_message(store.messages(cid)[0].id)
    atts.link(m.id, [att.id])
    store.organise.purge_chats([cid])
    assert atts.text(atts.get(att.id)).endswith(f"{SECRETS[2]} again.") and blob.exists()
    assert found(db) == {SECRETS[2]}  # only the file that is still used


def test_deleted_messages_leave_the_files_when_the_store_closes(tmp_path: Path) -> None:
    """A message delete can be undone while Ember runs, so its words stay until the store closes; then
    they go, with the file only that message used."""
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    store = ConversationStore(paths.database)
    atts = AttachmentStore(paths, store)
    cid, blob = secret_chat(store, atts)
    (first,) = [m for m in store.messages(cid) if m.parent_id is None]
    store.organise.delete_messages(first.id)
    assert store.messages(cid) == [] and blob.exists()  # (the undo may still want it)
    store.close()
    assert found(paths.database) == {SECRETS[3]}  # the chat (its title) stays; its messages are gone
    assert not blob.exists()
    again = ConversationStore(paths.database)
    assert [c.id for c in again.conversations()] == [cid]
    again.close()


def _reader(db: Path) -> sqlite3.Connection:
    """Another reader of the database holding one snapshot (as a backup's copy or `ember-chat chats` does)."""
    reader = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM conversations").fetchone()
    return reader


def test_a_sweep_a_reader_held_up_is_finished_when_the_next_backup_ends(setup) -> None:
    """While another reader holds a snapshot the WAL cannot be emptied: the deleted words stay in it until
    the sweep is finished, here by the next backup once that reader is gone."""
    store, atts, db = setup
    for i in range(30):
        c = store.create_conversation(f"chat {i}")
        store.add_message(c.id, "user", f"filler {i} " * 200)
    cid, _ = secret_chat(store, atts)
    store.organise.trash_chats([cid])
    reader = _reader(db)
    try:
        assert store.organise.empty_trash() == 1
        assert store.organise.sweep_pending
        assert found(db)  # (what a snapshot older than the delete may still read stays in the WAL)
    finally:
        reader.close()
    backup = BackupManager(store).backup()
    assert not store.organise.sweep_pending
    assert found(db) == set() and found(backup.path) == set()
