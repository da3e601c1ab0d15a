"""Backups of the chat database (engine/storage/backups.py), on real SQLite files: SQLite's online
backup API to a temporary name then renamed, the newest N kept with the copies made before a schema
migration counted apart, a damaged backup listed (never a crash) and refused for a restore, the daily
one only when the newest is older than a day, and a restore INTO the live connection, so everything that
shares it (store.tools, the attachment store) keeps working; a schema-4 database is copied before it
migrates, and that copy restores and migrates cleanly."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember_chat.engine.attachments import AttachmentStore, read_attachment_bytes
from ember_chat.engine.core.tools import ToolCall, ToolResult
from ember_chat.engine.errors import StoreError
from ember_chat.engine.storage.backup_files import BackupCancelled
from ember_chat.engine.storage.backups import BackupManager
from ember_chat.engine.storage.conversations import SCHEMA_VERSION, ConversationStore
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.backup_schemas import _schema_4_database

DAY = 24 * 3600.0
ADD = ToolCall("call00001", "calculator", {"expression": "2+3"}, '{"expression": "2+3"}')


class Clock:
    def __init__(self) -> None:
        self.now = float(int(time.time()))  # whole seconds: the name a backup is given keeps them exactly

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def paths(tmp_path: Path) -> AppPaths:
    return AppPaths(tmp_path / "data", tmp_path / "config")


@pytest.fixture
def store(paths: AppPaths) -> Iterator[ConversationStore]:
    s = ConversationStore(paths.database)
    yield s
    s.close()


def _chat(store: ConversationStore, title: str, text: str) -> int:
    conv = store.create_conversation(title)
    q = store.add_message(conv.id, "user", text)
    store.add_message(conv.id, "assistant", f"About {text}.", parent_id=q.id)
    return conv.id


def _rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def test_a_backup_is_a_complete_copy_listed_with_its_date_size_and_chats(store: ConversationStore) -> None:
    clock = Clock()
    _chat(store, "Herons", "herons")
    _chat(store, "Owls", "owls")
    manager = BackupManager(store, keep=5, clock=clock)
    info = manager.backup()
    assert info.path.parent == store.path.parent / "backups"
    assert (info.reason, info.chats, info.schema_version, info.created_at) == ("manual", 2, SCHEMA_VERSION, clock.now)
    assert info.size == info.path.stat().st_size > 0
    assert sorted(p.name for p in info.path.parent.iterdir()) == [info.path.name]  # renamed; no temp left, no -wal
    assert _rows(info.path, "SELECT title FROM conversations ORDER BY id") == [("Herons",), ("Owls",)]
    assert _rows(info.path, "SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'owls'") != []
    assert _rows(info.path, "PRAGMA journal_mode") == [("delete",)]  # one file that stands alone
    assert manager.backups() == [info]


def test_the_newest_are_kept_and_copies_made_before_a_migration_are_counted_apart(paths: AppPaths) -> None:
    _schema_4_database(paths.database)
    store = ConversationStore(paths.database)  # migrates: a copy is made first
    try:
        clock = Clock()
        manager = BackupManager(store, keep=3, clock=clock)
        (before_migration,) = manager.backups()
        assert (before_migration.reason, before_migration.schema_version) == ("before migration", 4)
        made = []
        for _ in range(5):
            clock.now += DAY + 1
            made.append(manager.daily())
        assert [b.path for b in manager.backups()] == [b.path for b in made[:1:-1]] + [before_migration.path]
        assert not made[0].path.exists() and not made[1].path.exists()
        assert before_migration.path.exists()  # daily runs never remove the last copy from before a migration
    finally:
        store.close()


def test_copies_set_aside_by_a_restore_are_counted_apart_from_the_daily_ones(store: ConversationStore) -> None:
    """The restore says the current chats are kept aside: the next daily copy (keep 1) must not remove that."""
    clock = Clock()
    _chat(store, "Old chat", "old")
    manager = BackupManager(store, keep=1, clock=clock)
    old = manager.backup()
    for i in range(5):
        _chat(store, f"Precious {i}", f"precious {i}")
    clock.now += 3600
    aside = manager.restore(old)
    assert (aside.reason, aside.chats) == ("before restore", 6)
    clock.now += 2 * DAY
    daily = manager.daily()
    assert daily is not None
    assert [(b.reason, b.chats) for b in manager.backups()] == [("daily", 1), ("before restore", 6)]
    assert aside.path.exists()
    # copies set aside by restores are pruned among themselves: the newest `keep`
    manager.keep = 2
    for _ in range(3):
        clock.now += 60
        manager.restore(daily)
    assert [b.reason for b in manager.backups()] == ["before restore", "before restore", "daily"]


def test_daily_backs_up_only_when_the_newest_is_older_than_a_day(store: ConversationStore) -> None:
    clock = Clock()
    _chat(store, "Herons", "herons")
    manager = BackupManager(store, clock=clock)
    first = manager.daily()
    assert first is not None and first.reason == "daily"
    clock.now += DAY - 60
    assert manager.daily() is None
    clock.now += 120
    second = manager.daily()
    assert second is not None and second.created_at == clock.now
    assert [b.path for b in manager.backups()] == [second.path, first.path]


def test_a_damaged_backup_is_listed_and_refused_for_a_restore_with_a_sentence(store: ConversationStore) -> None:
    clock = Clock()
    cid = _chat(store, "Herons", "herons")
    manager = BackupManager(store, clock=clock)
    good = manager.backup()
    clock.now += 10
    damaged = manager.backup()
    damaged.path.write_bytes(b"this is not a database" * 100)
    clock.now += 10
    truncated = manager.backup()
    with truncated.path.open("r+b") as f:
        f.truncate(1000)
    listed = manager.backups()
    assert [b.path for b in listed] == [truncated.path, damaged.path, good.path]
    assert [b.chats for b in listed] == [None, None, 1]
    assert listed[1].schema_version is None and listed[1].size == damaged.path.stat().st_size
    for bad in listed[:2]:
        with pytest.raises(StoreError, match="cannot be restored") as raised:
            manager.restore(bad)
        assert bad.path.name in str(raised.value) and "Error" not in str(raised.value)
    assert [c.id for c in store.conversations()] == [cid]  # the live database was not touched
    assert len(manager.backups()) == 3  # and nothing was set aside for a restore that did not happen


def test_a_backup_from_a_newer_ember_is_refused(store: ConversationStore) -> None:
    manager = BackupManager(store)
    info = manager.backup()
    db = sqlite3.connect(info.path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(StoreError, match="newer Ember"):
        manager.restore(manager.backups()[0])


def test_a_restore_goes_into_the_live_connection_so_tools_and_attachments_keep_working(paths: AppPaths) -> None:
    clock = Clock()
    store = ConversationStore(paths.database)
    atts = AttachmentStore(paths, store)
    kept = _chat(store, "Sums", "sums")
    answer = store.thread(kept)[-1].id
    store.set_tool_calls(answer, [ADD])
    store.set_tool_state(answer, ADD.id, ADD.name, "asking")  # a card waited when the backup was made
    note = atts.save(read_attachment_bytes("notes.txt", b"the heron nests by the river"))
    atts.link(store.thread(kept)[0].id, [note.id])
    manager = BackupManager(store, clock=clock)
    backup = manager.backup()

    clock.now += 60
    later = _chat(store, "Made after the backup", "later")
    store.delete_conversation(kept)

    aside = manager.restore(backup)
    assert aside.reason == "before restore" and aside.chats == 1
    assert _rows(aside.path, "SELECT id FROM conversations") == [(later,)]  # the current one, kept aside
    assert [c.id for c in store.conversations()] == [kept]
    assert store.schema_version == SCHEMA_VERSION
    # the same store object, its tool records and the attachment store read and write the restored rows
    (result,) = store.message(answer).tool_results
    assert result.state == "interrupted"  # the card that waited in the backup cannot wait any more
    store.set_tool_result(answer, ToolResult(ADD.id, ADD.name, "5"), source="Built-in", decision="once")
    assert store.message(answer).tool_results[0].content == "5"
    assert [a.name for a in atts.of_message(store.thread(kept)[0].id)] == ["notes.txt"]
    assert [h.text for h in atts.search([note.id], "heron")] == ["the heron nests by the river"]
    other = atts.save(read_attachment_bytes("more.txt", b"kingfishers too"))
    atts.link(store.thread(kept)[-1].id, [other.id])
    assert [h.conversation_id for h in store.search("sums")] == [kept, kept]
    again = store.add_message(kept, "user", "and then?", parent_id=answer)
    store.close()
    reopened = ConversationStore(paths.database)  # the restored rows are in the file itself
    try:
        assert [m.content for m in reopened.thread(kept)][-1] == "and then?" == reopened.message(again.id).content
        assert [t.content for t in reopened.message(answer).tool_results] == ["5"]
    finally:
        reopened.close()


def test_a_schema_4_database_is_backed_up_before_it_migrates_and_that_copy_restores_and_migrates(
    paths: AppPaths,
) -> None:
    _schema_4_database(paths.database, chats=3)
    store = ConversationStore(paths.database)
    try:
        assert store.schema_version == SCHEMA_VERSION
        manager = BackupManager(store)
        (copy,) = manager.backups()
        assert (copy.reason, copy.schema_version, copy.chats) == ("before migration", 4, 3)
        assert _rows(copy.path, "PRAGMA user_version") == [(4,)]
        for cid in [c.id for c in store.conversations()]:
            store.delete_conversation(cid)
        _chat(store, "New", "new")
        manager.restore(copy)
        assert store.schema_version == SCHEMA_VERSION
        assert sorted(c.title for c in store.conversations()) == ["Old chat 1", "Old chat 2", "Old chat 3"]
        assert [m.content for m in store.thread(2)] == ["old question 2 about herons"]
        assert {h.conversation_id for h in store.search("herons")} == {1, 2, 3}
        fresh = store.create_conversation("after")  # the migrated columns are there
        store.add_message(fresh.id, "user", "hello")
        assert store.conversation(fresh.id).title == "after"
        reasons = sorted(b.reason for b in manager.backups())
        assert reasons == ["before migration", "before restore"]  # restoring migrates without another copy
    finally:
        store.close()


def test_a_new_database_makes_no_copy_before_its_first_migration(paths: AppPaths, store: ConversationStore) -> None:
    assert BackupManager(store).backups() == []
    assert not (paths.database.parent / "backups").exists()


def test_a_cancelled_backup_leaves_no_file(store: ConversationStore) -> None:
    for i in range(50):
        _chat(store, f"chat {i}", "x" * 20_000)  # several steps of the online backup
    manager = BackupManager(store)
    cancel = threading.Event()
    steps: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        steps.append((done, total))
        cancel.set()

    with pytest.raises(BackupCancelled):
        manager.backup(progress=progress, cancel=cancel)
    assert len(steps) == 1 and manager.backups() == []
    assert list((store.path.parent / "backups").iterdir()) == []


def test_a_store_kept_in_memory_has_no_backups_and_says_why() -> None:
    store = ConversationStore(Path(":memory:"))
    try:
        manager = BackupManager(store)
        assert manager.backups() == [] and manager.daily() is None
        with pytest.raises(StoreError, match="kept in memory"):
            manager.backup()
    finally:
        store.close()


def test_a_copy_that_cannot_be_written_does_not_stop_the_migration(
    paths: AppPaths, caplog: pytest.LogCaptureFixture
) -> None:
    _schema_4_database(paths.database)
    (paths.database.parent / "backups").write_text("a file where the backups folder would go")
    with caplog.at_level("WARNING"):
        store = ConversationStore(paths.database)
    try:
        assert store.schema_version == SCHEMA_VERSION and len(store.conversations()) == 2
        assert "could not be backed up before" in caplog.text
    finally:
        store.close()


def test_daily_makes_no_copy_of_a_database_without_chats(store: ConversationStore) -> None:
    manager = BackupManager(store)
    assert manager.daily() is None and manager.backups() == []
    _chat(store, "First", "first")
    assert manager.daily() is not None


def test_attachment_files_are_kept_with_the_backups_and_come_back_with_a_restore(paths: AppPaths) -> None:
    clock = Clock()
    store = ConversationStore(paths.database)
    try:
        atts = AttachmentStore(paths, store)
        cid = _chat(store, "Photos", "photos")
        photo = atts.save(read_attachment_bytes("notes.txt", b"the heron stands in the reeds"))
        atts.link(store.thread(cid)[0].id, [photo.id])
        manager = BackupManager(store, keep=1, clock=clock)
        first = manager.backup()
        kept = paths.data_dir / "backups" / "attachments" / photo.sha256[:2] / photo.sha256
        assert kept.read_bytes() == b"the heron stands in the reeds"

        store.delete_conversation(cid)
        assert atts.prune() == 1 and not atts.blob_path(photo.sha256).exists()  # the chat's file is gone
        manager.restore(first)
        assert atts.text(atts.of_message(store.thread(cid)[0].id)[0]) == "the heron stands in the reeds"

        store.delete_conversation(cid)
        atts.prune()
        clock.now += 10
        manager.backup()  # keep 1: the only backup that held the file goes, and the file with it
        # (the copy the restore set aside is counted apart and stays; it was made without the file)
        assert [b.reason for b in manager.backups()] == ["manual", "before restore"]
        assert not kept.exists()
    finally:
        store.close()


def test_undoing_a_restore_with_keep_1_restores_the_copy_set_aside_and_keeps_it(store: ConversationStore) -> None:
    """Issue 27, item 3: a restore's copy of the chats set aside ("before restore") is how a restore is undone.
    The pruning of those copies ran before the backup was read, so with keep 1 restoring it deleted it
    first: the undo failed and the only copy of the current chats was gone."""
    clock = Clock()
    _chat(store, "Old chat", "old")
    manager = BackupManager(store, keep=1, clock=clock)
    old = manager.backup()
    precious = [_chat(store, f"Precious {i}", f"precious {i}") for i in range(3)]
    clock.now += 60
    aside = manager.restore(old)  # the restore
    assert [c.title for c in store.conversations()] == ["Old chat"]
    clock.now += 60
    again = manager.restore(aside)  # its undo, as Settings ▸ Backups… does it: the copy listed, restored
    assert {c.id for c in store.conversations()} >= set(precious)
    assert {c.title for c in store.conversations()} == {"Old chat", "Precious 0", "Precious 1", "Precious 2"}
    assert aside.path.exists() and again.path.exists()  # the copy restored was no candidate for pruning
    assert [(b.reason, b.chats) for b in manager.backups()] == [
        ("before restore", 1),
        ("before restore", 4),
        ("manual", 1),
    ]
    clock.now += 60
    manager.restore(old)  # the next restore: now the older copies are pruned to the newest `keep`
    assert [(b.reason, b.chats) for b in manager.backups()] == [("before restore", 4), ("manual", 1)]


def test_a_restore_that_fails_prunes_nothing(paths: AppPaths) -> None:
    """Nothing is pruned until a restore has succeeded: a backup whose migration fails (here a schema-4 copy
    holding a table the next migration makes) leaves the chats and every copy set aside before as they were."""
    _schema_4_database(paths.database, chats=1)
    db = sqlite3.connect(paths.database, isolation_level=None)
    db.execute("CREATE TABLE folders (id INTEGER PRIMARY KEY)")  # migration 5 makes it: that one fails
    db.close()
    broken = paths.data_dir / "backups" / "chats-20200101-000000-000000-before-migration.sqlite3"
    broken.parent.mkdir(parents=True)
    paths.database.rename(broken)
    store = ConversationStore(paths.database)
    try:
        clock = Clock()
        _chat(store, "Mine", "mine")
        manager = BackupManager(store, keep=1, clock=clock)
        first = manager.restore(manager.backup())  # one copy set aside by an earlier restore
        clock.now += 60
        with pytest.raises(StoreError, match="could not be restored") as raised:
            manager.restore(next(b for b in manager.backups() if b.path == broken))
        assert "Your chats are as they were" in str(raised.value)
        assert [c.title for c in store.conversations()] == ["Mine"]
        assert first.path.exists()  # (pruned first, keep 1 would have removed it)
        assert broken.exists()
    finally:
        store.close()
