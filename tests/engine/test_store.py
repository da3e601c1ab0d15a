"""The chat store: conversations, branches, search, migrations, and crash safety while streaming."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ember_chat.engine.errors import StoreError
from ember_chat.engine.storage.conversations import SCHEMA_VERSION, ConversationStore
from ember_chat.engine.storage.streaming import StreamingMessage
from tests.helpers.paths import REPO

ROOT = REPO


@pytest.fixture
def store(tmp_path: Path):
    s = ConversationStore(tmp_path / "chats.sqlite3")
    yield s
    s.close()


def test_wal_and_schema_version(store: ConversationStore) -> None:
    with sqlite3.connect(store.path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.schema_version == SCHEMA_VERSION


def test_conversation_crud_newest_first(tmp_path: Path) -> None:
    clock = iter(range(100, 200)).__next__
    s = ConversationStore(tmp_path / "c.db", clock=lambda: float(clock()))
    a = s.create_conversation("First", model="m", system_prompt="sys", params={"temperature": 0.2})
    b = s.create_conversation("Second")
    assert [c.title for c in s.conversations()] == ["Second", "First"]
    s.add_message(a.id, "user", "bump")
    assert [c.title for c in s.conversations()] == ["First", "Second"]
    s.update_conversation(b.id, title="Renamed", params={"top_k": 5})
    assert s.conversation(b.id).title == "Renamed" and s.conversation(b.id).params == {"top_k": 5}
    assert s.conversation(a.id).params == {"temperature": 0.2} and s.conversation(a.id).system_prompt == "sys"
    s.delete_conversation(a.id)
    assert [c.id for c in s.conversations()] == [b.id]
    assert s.search("bump") == []
    s.close()


def test_messages_branches_and_metrics(store: ConversationStore) -> None:
    c = store.create_conversation()
    u1 = store.add_message(c.id, "user", "hello")
    a1 = store.add_message(c.id, "assistant", "hi there", parent_id=u1.id, metrics={"ttft_s": 0.2})
    u2 = store.add_message(c.id, "user", "tell me a joke", parent_id=a1.id)
    a2 = store.add_message(c.id, "assistant", "no", parent_id=u2.id)
    # edit the second user message: a sibling branch
    u2b = store.add_message(c.id, "user", "tell me a poem", parent_id=a1.id)
    a2b = store.add_message(c.id, "assistant", "roses", parent_id=u2b.id)
    assert [m.content for m in store.thread(c.id)] == ["hello", "hi there", "tell me a poem", "roses"]
    assert [m.content for m in store.thread(c.id, a2.id)] == ["hello", "hi there", "tell me a joke", "no"]
    assert [m.id for m in store.siblings(u2b.id)] == [u2.id, u2b.id]
    store.update_conversation(c.id, active_leaf=a2.id)
    assert store.thread(c.id)[-1].id == a2.id
    assert store.message(a1.id).metrics == {"ttft_s": 0.2}
    assert a2b.complete


def test_full_text_search_across_chats(store: ConversationStore) -> None:
    a = store.create_conversation("Cooking")
    b = store.create_conversation("Travel")
    store.add_message(a.id, "user", "How long to boil an egg?")
    m = store.add_message(b.id, "assistant", "Lisbon has wonderful egg tarts (pastéis de nata).")
    store.add_message(b.id, "user", "What about Porto?")
    hits = store.search("egg")
    assert {h.conversation_title for h in hits} == {"Cooking", "Travel"}
    hits = store.search("lisb tart")  # prefixes, every word must match
    assert [(h.conversation_id, h.message_id) for h in hits] == [(b.id, m.id)]
    assert ("Lisbon", True) in hits[0].parts() and ("tarts", True) in hits[0].parts()
    assert hits[0].text.startswith("Lisbon has wonderful egg tarts")  # the matches marked, not bracketed
    assert store.search('"; DROP TABLE messages; --') == []
    store.update_message(m.id, "Changed text")
    assert store.search("lisbon") == [] and store.search("changed")


def test_migration_from_version_1(tmp_path: Path) -> None:
    from ember_chat.engine.storage import conversations as store_module

    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript(store_module._MIGRATIONS[0] + "PRAGMA user_version=1;")
    db.execute("INSERT INTO conversations (title, created_at, updated_at) VALUES ('old', 1, 1)")
    db.commit()
    db.close()
    s = ConversationStore(path)
    assert s.schema_version == SCHEMA_VERSION
    (conv,) = s.conversations()
    assert conv.title == "old" and conv.active_leaf is None
    s.close()


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 5}")
    db.close()
    with pytest.raises(StoreError, match="newer Ember"):
        ConversationStore(path)


def test_damaged_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="cannot be opened"):
        ConversationStore(path)


def test_streaming_message_throttles_writes(store: ConversationStore) -> None:
    now = [0.0]
    c = store.create_conversation()
    sm = StreamingMessage(store, c.id, None, interval_s=1.0, clock=lambda: now[0])
    sm.append("Hel")
    assert store.message(sm.message.id).content == ""  # not yet: less than a second
    now[0] = 1.0
    sm.append("lo")
    assert store.message(sm.message.id).content == "Hello"
    assert not store.message(sm.message.id).complete
    assert sm.finish({"output_tokens": 2})
    msg = store.message(sm.message.id)
    assert msg.complete and msg.content == "Hello" and msg.metrics == {"output_tokens": 2}


WRITER = """
import sys
from pathlib import Path
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.streaming import StreamingMessage
store = ConversationStore(Path(sys.argv[1]))
conv = store.create_conversation("crash test")
sm = StreamingMessage(store, conv.id, None, interval_s=0.2)
i = 0
written = 0
while True:  # streams until killed
    sm.append(f"token{i} ")
    i += 1
    if store.message(sm.message.id).content != "" and len(sm.text) != written and not sm._dirty:
        written = len(sm.text)
        print(written, flush=True)
"""


def test_killed_writer_loses_at_most_the_last_interval(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        flushed = [int(proc.stdout.readline()) for _ in range(3)]  # three flushes happened
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    s = ConversationStore(db)
    (conv,) = s.conversations()
    (msg,) = s.messages(conv.id)
    assert not msg.complete  # marked as interrupted
    assert len(msg.content) >= flushed[-1]  # everything flushed before the kill survived
    assert msg.content.startswith("token0 token1 ") and msg.content.endswith(" ")
    s.close()
