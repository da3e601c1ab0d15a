"""The Trash (trash, restore, empty, the 30-day purge when the store opens), deleting a folder, and deleting
messages with an exact undo: the same rows back with the same ids (tool records, attachment links,
sources, comparisons) and the chat's active leaf as it was. Real SQLite files; the attachments through the
real AttachmentStore and planner."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ember_chat.engine.attachments import AttachmentStore, plan_turn, read_attachment_bytes
from ember_chat.engine.core.tools import ToolCall, ToolResult
from ember_chat.engine.errors import StoreError
from ember_chat.engine.storage.conversations import TRASH_DAYS, ConversationStore
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.clock import Clock

DAY = 86400.0
TABLES = (
    "conversations",
    "messages",
    "tool_messages",
    "message_attachments",
    "message_sources",
    "comparisons",
    "comparison_answers",
    "folders",
)


def dump(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row of the tables an undo must put back, read through a second connection."""
    with sqlite3.connect(path) as db:
        return {t: db.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in TABLES}


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path, clock: Clock):
    s = ConversationStore(tmp_path / "chats.sqlite3", clock=clock)
    yield s
    s.close()


def chat(store: ConversationStore, title: str) -> int:
    c = store.create_conversation(title)
    store.add_message(c.id, "user", f"words of {title}")
    return c.id


def test_trash_and_restore_keep_folder_pin_and_archive(store: ConversationStore) -> None:
    a, b, c = (chat(store, t) for t in ("A", "B", "C"))
    work = store.organise.create_folder("Work")
    store.organise.move_chats([a], work.id)
    store.organise.set_pinned([a], True)
    store.organise.archive_chats([b], True)
    first = store.organise.trash_chats([b])
    second = store.organise.trash_chats([a, c])
    assert first.label == "Moved “B” to the Trash." and second.label == "Moved 2 chats to the Trash."
    trashed = store.organise.trashed()
    assert [x.id for x in trashed[:2]] != [b] and trashed[-1].id == b  # newest deletion first
    assert {x.id for x in trashed} == {a, b, c} and all(x.deleted_at for x in trashed)
    assert store.organise.restore_chats([a, b]) == 2
    assert store.conversation(a).folder_id == work.id and store.conversation(a).pinned
    assert [x.id for x in store.conversations(archived=True)] == [b]
    store.organise.undo(second)  # c comes back too (a was restored already: it stays out)
    assert store.organise.trashed() == [] and {x.id for x in store.conversations()} == {a, c}


def test_empty_trash_deletes_for_good_and_the_store_purges_old_trash_when_it_opens(
    tmp_path: Path, clock: Clock
) -> None:
    path = tmp_path / "chats.sqlite3"
    s = ConversationStore(path, clock=clock)
    old, recent, kept = (chat(s, t) for t in ("Old", "Recent", "Kept"))
    s.organise.trash_chats([old])
    clock.now += 10 * DAY
    s.organise.trash_chats([recent])
    clock.now += (TRASH_DAYS - 5) * DAY  # old: 35 days in the Trash; recent: 25
    s.close()

    s = ConversationStore(path, clock=clock)
    assert [x.id for x in s.organise.trashed()] == [recent]
    with pytest.raises(KeyError):
        s.conversation(old)
    assert s.organise.empty_trash(older_than_days=30) == 0
    assert s.organise.empty_trash() == 1
    assert s.organise.trashed() == [] and [x.id for x in s.conversations()] == [kept]
    assert dump(path)["messages"] == [r for r in dump(path)["messages"] if r[1] == kept]
    assert s.organise.delete_all_chats() == 1 and s.conversations() == []
    s.close()


_OPEN_WITH_A_FULL_DISK = """
import json, resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_FSIZE, (40000, 40000))  # no file may grow past 40 kB: the WAL fills up
from ember_chat.engine.storage import recovery
opened = recovery.open_conversations(Path(sys.argv[1]))
print(json.dumps({"moved": opened.moved_to is not None, "notice": opened.notice,
                  "chats": [c.title for c in opened.store.conversations()],
                  "trash": [c.title for c in opened.store.organise.trashed()]}))
opened.store.close()
"""


def test_a_purge_at_open_that_fails_leaves_the_chats_open_and_the_file_in_place(tmp_path: Path, clock: Clock) -> None:
    """The 30-day purge at open is housekeeping: when its writes fail (the disk is full: here a real file size
    limit in a child process), the chats open as they are, the file stays where it is, the purge waits."""
    path = tmp_path / "chats.sqlite3"
    s = ConversationStore(path, clock=clock)
    live = [chat(s, f"chat {i}") for i in range(3)]
    old = s.create_conversation("Old")
    for i in range(40):
        s.add_message(old.id, "user", f"old words {i} " * 100)
    s.organise.trash_chats([old.id])
    s.close()  # (the store's clock is far in the past: the chat has been in the Trash for decades)

    done = subprocess.run(
        [sys.executable, "-c", _OPEN_WITH_A_FULL_DISK, str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    opened = json.loads(done.stdout)
    assert opened == {"moved": False, "notice": None, "chats": ["chat 2", "chat 1", "chat 0"], "trash": ["Old"]}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chats.sqlite3"]

    s = ConversationStore(path)  # room again: the purge is done at this open
    assert s.organise.trashed() == [] and sorted(c.id for c in s.conversations()) == live
    s.close()


def test_emptying_the_trash_keeps_a_file_a_message_delete_can_still_bring_back(tmp_path: Path, clock: Clock) -> None:
    """The same file in chats A and B; B's message is deleted (undoable), then the Trash holding A is
    emptied: the file stays while the undo can bring B's message back; at close (no undo any more) it goes."""
    paths = AppPaths(tmp_path, tmp_path / "config")
    s = ConversationStore(paths.database, clock=clock)
    atts = AttachmentStore(paths, s)
    cv = read_attachment_bytes("cv.txt", b"my CV " * 50)
    a = s.create_conversation("A")
    in_a = s.add_message(a.id, "user", "read my cv")
    atts.link(in_a.id, [atts.save(cv).id])
    b = s.create_conversation("B")
    in_b = s.add_message(b.id, "user", "improve my cv")
    atts.link(in_b.id, [atts.save(cv).id])
    (file,) = atts.of_message(in_b.id)

    undo = s.organise.delete_messages(in_b.id)
    s.organise.trash_chats([a.id])
    assert s.organise.empty_trash() == 1
    assert atts.blob_path(file.sha256).exists()
    s.organise.undo(undo)
    assert [(f.id, f.name) for f in atts.of_message(in_b.id)] == [(file.id, "cv.txt")]
    assert atts.text(atts.of_message(in_b.id)[0]) == "my CV " * 50

    s.organise.delete_messages(in_b.id)  # deleted again, never undone: the sweep at close takes the file
    s.close()
    assert dump(paths.database)["message_attachments"] == []
    with sqlite3.connect(paths.database) as db:
        assert db.execute("SELECT count(*) FROM attachments").fetchone()[0] == 0
    assert not atts.blob_path(file.sha256).exists()


def test_deleting_a_folder_sends_its_chats_to_the_trash_and_undo_brings_everything_back(
    tmp_path: Path, store: ConversationStore
) -> None:
    a, b, c, d = (chat(store, t) for t in ("A", "B", "C", "D"))
    work = store.organise.create_folder("Work")
    sub = store.organise.create_folder("Reports", parent_id=work.id)
    store.organise.set_collapsed(sub.id, True)
    store.organise.move_chats([a, b], work.id)
    store.organise.move_chats([c], sub.id)
    store.organise.trash_chats([b])  # in the Trash already: stays there, in its folder, after the undo
    before = dump(store.path)
    undo = store.organise.delete_folder(work.id)
    assert undo.label == "Deleted the folder “Work”; 2 chats went to the Trash."
    assert store.organise.folders() == []
    assert [x.id for x in store.conversations()] == [d]
    assert {x.id for x in store.organise.trashed()} == {a, b, c}
    store.organise.undo(undo)
    assert dump(store.path) == before


def build_chat_with_everything(tmp_path: Path, store: ConversationStore) -> dict[str, int]:
    """A chat with two branches; below the question that is deleted: an answer with a tool call and
    its result, an attachment, the sources it used, a comparison asked from the question, and an answer
    of an older comparison kept as one of the deleted messages."""
    atts = AttachmentStore(AppPaths(tmp_path, tmp_path / "config"), store)
    c = store.create_conversation("Everything")
    u1 = store.add_message(c.id, "user", "first question")
    a1 = store.add_message(c.id, "assistant", "first answer", parent_id=u1.id)
    u2 = store.add_message(c.id, "user", "second question about zebras", parent_id=a1.id)
    note = atts.save(read_attachment_bytes("note.md", b"# Plan\n\nShip on Friday."))
    atts.link(u2.id, [note.id])
    a2 = store.add_message(c.id, "assistant", "calling", parent_id=u2.id, metrics={"ttft_s": 0.1})
    call = ToolCall("call00001", "calculator", {"expression": "2+3"}, '{"expression": "2+3"}')
    store.set_tool_calls(a2.id, [call])
    store.set_tool_result(a2.id, ToolResult(call.id, "calculator", "5", duration_ms=1.5), source="Built-in")
    plan = plan_turn([atts.ref(note)], "when do we ship?", 1000, lambda t: len(t.split()), atts)
    atts.record_sources(a2.id, plan)
    u3 = store.add_message(c.id, "user", "third", parent_id=a2.id)
    asked = store.comparisons.create(c.id, u2.id, ["m1", "m2"], {"seed": 1})
    store.comparisons.set_answer(asked.answers[0].id, "an answer from m1", metrics={"ttft_s": 0.2})
    older = store.comparisons.create(c.id, u1.id, ["m1", "m2"], {"seed": 2})
    kept_as = store.add_message(c.id, "assistant", "kept answer", parent_id=u1.id)
    store.comparisons.keep(older.answers[1].id, kept_as.id)
    # the other branch (edited second question) and the active leaf back on the first branch's end
    u2b = store.add_message(c.id, "user", "second question, edited", parent_id=a1.id)
    store.update_conversation(c.id, active_leaf=u3.id)
    return {"c": c.id, "u1": u1.id, "a1": a1.id, "u2": u2.id, "u3": u3.id, "u2b": u2b.id, "kept": kept_as.id}


def test_deleting_messages_and_undo_put_back_the_same_rows(tmp_path: Path, store: ConversationStore) -> None:
    ids = build_chat_with_everything(tmp_path, store)
    before = dump(store.path)
    undo = store.organise.delete_messages(ids["u2"])
    assert undo.label == "Deleted 3 messages."
    left = {m.id for m in store.messages(ids["c"])}
    assert left == {ids["u1"], ids["a1"], ids["u2b"], ids["kept"]}
    # the active leaf moves to the newest branch left under the deleted message's parent
    assert store.conversation(ids["c"]).active_leaf == ids["u2b"]
    assert store.search("zebras") == []
    after = dump(store.path)
    assert after["tool_messages"] == [] and after["message_attachments"] == [] and after["message_sources"] == []
    assert [r[2] for r in after["comparisons"]] == [ids["u1"]]

    store.organise.undo(undo)
    assert dump(store.path) == before
    assert [h.message_id for h in store.search("zebras")] == [ids["u2"]]
    assert [m.id for m in store.thread(ids["c"])][-1] == ids["u3"]


def test_deleting_the_kept_answer_and_undo_keeps_it_again(tmp_path: Path, store: ConversationStore) -> None:
    ids = build_chat_with_everything(tmp_path, store)
    before = dump(store.path)
    undo = store.organise.delete_messages(ids["kept"])
    assert undo.label == "Deleted a message."
    assert all(c.answers[1].kept_message_id is None for c in store.comparisons.of_conversation(ids["c"])[-1:])
    store.organise.undo(undo)
    assert dump(store.path) == before


def test_an_undo_whose_ids_were_taken_since_brings_the_rows_back_under_new_ids(
    tmp_path: Path, store: ConversationStore
) -> None:
    """Delete the end of a chat, write a new answer (SQLite gives it the deleted answer's id), undo: the
    deleted rows come back as they were, under new ids where theirs were taken, with what refers to them."""
    atts = AttachmentStore(AppPaths(tmp_path, tmp_path / "config"), store)
    cid = store.create_conversation("End of the chat").id
    u1 = store.add_message(cid, "user", "first question")
    a1 = store.add_message(cid, "assistant", "first answer", parent_id=u1.id)
    u2 = store.add_message(cid, "user", "second question about zebras", parent_id=a1.id)
    note = atts.save(read_attachment_bytes("note.md", b"# Plan\n\nShip on Friday."))
    atts.link(u2.id, [note.id])
    a2 = store.add_message(cid, "assistant", "calling", parent_id=u2.id, metrics={"ttft_s": 0.1})
    call = ToolCall("call00001", "calculator", {"expression": "2+3"}, '{"expression": "2+3"}')
    store.set_tool_calls(a2.id, [call])
    store.set_tool_result(a2.id, ToolResult(call.id, "calculator", "5"), source="Built-in")
    atts.record_sources(a2.id, plan_turn([atts.ref(note)], "when?", 1000, lambda t: len(t.split()), atts))
    asked = store.comparisons.create(cid, u2.id, ["m1", "m2"], {"seed": 1})
    store.comparisons.set_answer(asked.answers[0].id, "an answer from m1")
    undo = store.organise.delete_messages(u2.id)
    newer = store.add_message(cid, "user", "a new question in the deleted one's place", parent_id=a1.id)
    answer = store.add_message(cid, "assistant", "a new answer", parent_id=newer.id)
    assert (newer.id, answer.id) == (u2.id, a2.id)  # (SQLite gives the deleted ids again: why this test exists)
    store.set_tool_calls(answer.id, [ToolCall("call00009", "calculator", {"expression": "3"}, '{"expression": "3"}')])
    store.set_tool_result(answer.id, ToolResult("call00009", "calculator", "3"), source="Built-in")
    store.organise.undo(undo)

    assert store.message(newer.id).content == "a new question in the deleted one's place"
    assert [r.content for r in store.message(answer.id).tool_results] == ["3"]
    thread = store.thread(cid)  # the active leaf as it was: the end of the deleted branch, back
    assert [m.content for m in thread] == ["first question", "first answer", "second question about zebras", "calling"]
    back_u2, back_a2 = thread[2], thread[3]
    assert back_u2.id != u2.id and back_a2.parent_id == back_u2.id
    assert back_a2.id not in (a2.id, answer.id) and back_a2.metrics == {"ttft_s": 0.1}
    assert [r.content for r in back_a2.tool_results] == ["5"]
    assert [a.name for a in atts.of_message(back_u2.id)] == ["note.md"] and atts.plan_of(back_a2.id) is not None
    asked = [c for c in store.comparisons.of_conversation(cid) if c.prompt_id == back_u2.id]
    assert len(asked) == 1 and asked[0].answers[0].content == "an answer from m1"
    assert [h.message_id for h in store.search("zebras")] == [back_u2.id]


def test_deleting_a_message_that_is_gone_says_so(store: ConversationStore) -> None:
    with pytest.raises(StoreError, match="no longer in the chat"):
        store.organise.delete_messages(12345)


def test_undoing_a_move_to_the_trash_after_the_trash_was_emptied_says_so(store: ConversationStore) -> None:
    a = chat(store, "A")
    undo = store.organise.trash_chats([a])
    store.organise.empty_trash()
    with pytest.raises(StoreError, match="can no longer be undone: the chats were deleted for good"):
        store.organise.undo(undo)
    assert store.conversations() == [] and store.organise.trashed() == []


def test_message_counts_cover_every_branch(store: ConversationStore) -> None:
    a, b = chat(store, "A"), store.create_conversation("Empty").id
    (u,) = store.messages(a)
    store.add_message(a, "assistant", "one", parent_id=u.id)
    store.add_message(a, "assistant", "another branch", parent_id=u.id)
    assert store.message_counts() == {a: 3} and b not in store.message_counts()


def test_undoing_a_folder_delete_after_a_new_folder_took_its_id(store: ConversationStore) -> None:
    a = chat(store, "A")
    work = store.organise.create_folder("Work")
    sub = store.organise.create_folder("Reports", parent_id=work.id)
    store.organise.move_chats([a], sub.id)
    undo = store.organise.delete_folder(work.id)
    newer = store.organise.create_folder("Newer")
    assert newer.id == work.id  # (SQLite gives the deleted id again)
    store.organise.undo(undo)
    folders = {f.name: f for f in store.organise.folders()}
    assert set(folders) == {"Newer", "Work", "Reports"} and folders["Newer"].id == newer.id
    assert folders["Reports"].parent_id == folders["Work"].id != newer.id
    assert store.conversation(a).folder_id == folders["Reports"].id and store.conversation(a).deleted_at is None


def test_deleting_a_first_message_moves_to_the_other_branch_or_leaves_an_empty_chat(store: ConversationStore) -> None:
    cid = store.create_conversation("Roots").id
    first = store.add_message(cid, "user", "first try")
    store.add_message(cid, "assistant", "answer to the first try", parent_id=first.id)
    edited = store.add_message(cid, "user", "second try")  # an edited first message: another root
    edited_answer = store.add_message(cid, "assistant", "answer to the second try", parent_id=edited.id)
    store.update_conversation(cid, active_leaf=first.id)
    undo = store.organise.delete_messages(first.id)
    assert undo.label == "Deleted 2 messages." and store.conversation(cid).active_leaf == edited_answer.id
    store.organise.delete_messages(edited.id)
    assert store.conversation(cid).active_leaf is None and store.thread(cid) == []
    assert [c.id for c in store.conversations()] == [cid]  # the chat stays, empty
