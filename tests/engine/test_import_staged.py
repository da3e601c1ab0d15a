"""An import writes in short transactions (a batch of chats each) on the store's shared connection, so
the window's own writes (a streaming answer's flush) wait for one batch at most, never the whole import
(review finding 8). The imported chats stay hidden (a staging marker) until one short last transaction
shows them all: conversations(), search(), trashed() and message_counts() never show a chat half
imported; a cancel or a failure removes what was written; what a crashed import left is purged when a
store opens later. Real SQLite files, a real worker thread, a real child process for the crash."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.import_staging import STALE_S
from ember_chat.engine.storage.importing import ImportCancelled, ImportFailed, import_chats
from tests.helpers.import_fixtures import many
from tests.helpers.paths import REPO

ROOT = REPO


def write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def rows(path: Path) -> dict[str, int]:
    db = sqlite3.connect(path)
    try:
        tables = ("conversations", "messages", "messages_fts", "tool_messages", "comparisons", "attachments")
        return {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}
    finally:
        db.close()


@pytest.fixture
def store(tmp_path: Path) -> ConversationStore:
    s = ConversationStore(tmp_path / "chats.sqlite3")
    yield s
    s.close()


def _open_chat(store: ConversationStore) -> int:
    """The chat open in the window, its answer streaming (an incomplete message)."""
    c = store.create_conversation("open chat")
    u = store.add_message(c.id, "user", "hi")
    return store.add_message(c.id, "assistant", "", u.id, complete=False).id


def test_a_gui_thread_write_waits_for_one_batch_never_the_whole_import(
    store: ConversationStore, tmp_path: Path
) -> None:
    """300 chats of 30 long messages imported on a worker thread while this thread (the window's) writes
    its streaming answer: its longest wait is a small part of the import's whole time (before: the
    whole write, as one transaction held the store's lock from the first chat to the last)."""
    source = write(tmp_path / "conversations.json", many(300, turns=15, words=60))
    answer = _open_chat(store)
    writing, done = threading.Event(), threading.Event()
    result: list[object] = []

    def work() -> None:
        try:
            result.append(import_chats(store, source, lambda n, _total: n >= 1 and writing.set()))
        except BaseException as exc:  # (told below)
            result.append(exc)
        finally:
            done.set()

    started = time.perf_counter()
    worker = threading.Thread(target=work, name="import")
    worker.start()
    worst = 0.0
    try:
        assert writing.wait(60)
        while not done.is_set():
            t0 = time.perf_counter()
            store.update_message(answer, "partial answer")
            worst = max(worst, time.perf_counter() - t0)
            done.wait(0.005)
    finally:
        worker.join()
    whole = time.perf_counter() - started
    (report,) = result
    assert not isinstance(report, BaseException), report
    assert report.chats == 300 and rows(store.path)["messages"] == 300 * 30 + 2
    assert worst < whole / 5, f"a GUI-thread write waited {worst:.3f} s of an import of {whole:.3f} s"


def test_chats_half_imported_are_never_shown(store: ConversationStore, tmp_path: Path) -> None:
    source = write(tmp_path / "conversations.json", many(120))
    _open_chat(store)
    seen: list[tuple] = []

    def progress(n: int, total: int) -> None:
        if n == 100:  # batches are written and committed by now, the last transaction not yet
            with sqlite3.connect(store.path) as other:  # what another program reading the file sees
                staged = other.execute("SELECT count(*) FROM conversations").fetchone()[0]
            seen.append(
                (
                    [c.title for c in store.conversations()],
                    store.search("Question"),
                    store.organise.trashed(),
                    len(store.message_counts()),
                    staged,
                )
            )

    report = import_chats(store, source, progress)
    ((titles, hits, trashed, counted, staged),) = seen
    assert titles == ["open chat"] and hits == [] and trashed == [] and counted == 1
    assert staged > 1  # (they were written: only hidden)
    assert report.chats == 120 and len(store.conversations()) == 121 and len(store.message_counts()) == 121
    assert len(store.search("Question")) == 50 and store.organise.trashed() == []


def test_a_cancel_after_some_batches_leaves_nothing(store: ConversationStore, tmp_path: Path) -> None:
    source = write(tmp_path / "conversations.json", many(120))
    _open_chat(store)
    before = rows(store.path)
    cancel = threading.Event()
    with pytest.raises(ImportCancelled):
        import_chats(store, source, lambda n, _t: n == 110 and cancel.set(), cancel)
    assert rows(store.path) == before and [c.title for c in store.conversations()] == ["open chat"]


def test_a_failure_after_some_batches_leaves_nothing(store: ConversationStore, tmp_path: Path) -> None:
    """An image beside the export that cannot be read, in the last chat: the chats written before go."""
    from ember_chat.engine.attachments import AttachmentStore
    from ember_chat.engine.attachments.imported import AttachmentImporter
    from ember_chat.engine.storage.paths import AppPaths
    from tests.helpers.attachment_files import image_bytes
    from tests.helpers.import_fixtures import DALLE_ASSET, dalle

    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    s = ConversationStore(paths.database)
    atts = AttachmentStore(paths, s)
    export = tmp_path / "export"
    export.mkdir()
    (export / "file-Good01-fine.png").write_bytes(image_bytes("PNG"))
    (export / f"{DALLE_ASSET}-broken.png").write_bytes(b"")  # empty: it cannot be attached
    chats = many(80)
    good = chats[3]["mapping"]
    leaf = chats[3]["current_node"]
    good[leaf]["message"]["content"] = {
        "content_type": "multimodal_text",
        "parts": [{"content_type": "image_asset_pointer", "asset_pointer": "file-service://file-Good01"}, "a"],
    }
    try:
        _open_chat(s)
        before = rows(s.path)
        with pytest.raises(ImportFailed):
            import_chats(
                s, write(export / "conversations.json", [*chats, dalle()]), attachments=AttachmentImporter(atts)
            )
        assert rows(s.path) == before and [c.title for c in s.conversations()] == ["open chat"]
        assert [p for p in (paths.data_dir / "attachments").rglob("*") if p.is_file()] == []  # its blob went
    finally:
        s.close()


CRASH = """
import os, sys
sys.path[:0] = [{root!r} + "/engine", {root!r}]
from pathlib import Path
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.importing import import_chats
s = ConversationStore(Path({db!r}))
def progress(n, total):
    if n == 100:
        os._exit(3)  # the process dies in the middle of the import (power cut, killed)
import_chats(s, Path({src!r}), progress)
"""


def test_what_a_crashed_import_left_is_hidden_then_purged_when_a_store_opens(tmp_path: Path) -> None:
    db = tmp_path / "chats.sqlite3"
    s = ConversationStore(db)
    _open_chat(s)
    s.close()
    before = rows(db)
    source = write(tmp_path / "conversations.json", many(120))
    code = CRASH.format(root=str(ROOT), db=str(db), src=str(source))
    done = subprocess.run([sys.executable, "-c", code], timeout=120, capture_output=True, text=True, env=os.environ)
    assert done.returncode == 3, done.stderr
    assert rows(db)["conversations"] > before["conversations"]  # batches were committed before the crash

    s = ConversationStore(db)  # soon after: another import may still be running in another process
    try:
        assert [c.title for c in s.conversations()] == ["open chat"] and s.organise.trashed() == []
        assert len(s.message_counts()) == 1 and s.search("Question") == []
    finally:
        s.close()
    later = time.time() + STALE_S + 60
    s = ConversationStore(db, clock=lambda: later)  # an hour later: no import runs that long
    s.close()
    assert rows(db) == before
