"""Undo after an earlier undo gave rows new ids: SQLite gives a deleted row's id to the next new row, so a
row put back by an undo may come back under a new id; every older undo on the stack must then name it by
its new id (its parent, its folder, the chat's active leaf, the answer kept from it), never the new row
that took its old one. And an undo never re-points a comparison answer kept again since. Real SQLite files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ember_chat.engine.errors import StoreError
from ember_chat.engine.storage.conversations import ConversationStore


@pytest.fixture
def store(tmp_path: Path):
    s = ConversationStore(tmp_path / "chats.sqlite3")
    yield s
    s.close()


def test_two_message_deletes_undone_after_a_new_answer_took_an_id(store: ConversationStore) -> None:
    o = store.organise
    c = store.create_conversation("x")
    q1 = store.add_message(c.id, "user", "Q1")
    a1 = store.add_message(c.id, "assistant", "A1", q1.id)
    q2 = store.add_message(c.id, "user", "Q2", a1.id)
    store.add_message(c.id, "assistant", "A2", q2.id)
    delete_q2 = o.delete_messages(q2.id)
    delete_a1 = o.delete_messages(a1.id)
    regenerated = store.add_message(c.id, "assistant", "A1 regenerated", q1.id)
    assert regenerated.id == a1.id  # (SQLite gives the deleted id again: why this test exists)

    o.undo(delete_a1)
    o.undo(delete_q2)  # Ctrl+Z twice

    by_content = {m.content: m for m in store.messages(c.id)}
    assert by_content["Q2"].parent_id == by_content["A1"].id != regenerated.id
    assert by_content["A1 regenerated"].parent_id == q1.id
    assert [m.content for m in store.thread(c.id)] == ["Q1", "A1", "Q2", "A2"]  # the active leaf as it was


def test_an_older_undo_keeps_naming_a_row_that_took_a_deleted_id(store: ConversationStore) -> None:
    """The new row that took A1's id, not A1 back under its new id, is what a later delete refers to."""
    o = store.organise
    c = store.create_conversation("x")
    q1 = store.add_message(c.id, "user", "Q1")
    a1 = store.add_message(c.id, "assistant", "A1", q1.id)
    delete_a1 = o.delete_messages(a1.id)
    regenerated = store.add_message(c.id, "assistant", "A1 regenerated", q1.id)
    o.undo(delete_a1)
    reply = store.add_message(c.id, "user", "reply to the regenerated one", regenerated.id)
    delete_reply = o.delete_messages(reply.id)
    o.undo(delete_reply)
    assert store.message(reply.id).parent_id == regenerated.id


def test_an_undo_whose_parent_was_deleted_since_and_its_id_taken_says_so(store: ConversationStore) -> None:
    o = store.organise
    c = store.create_conversation("x")
    q1 = store.add_message(c.id, "user", "Q1")
    a1 = store.add_message(c.id, "assistant", "A1", q1.id)
    q2 = store.add_message(c.id, "user", "Q2", a1.id)
    delete_q2 = o.delete_messages(q2.id)
    o.delete_messages(a1.id)  # never undone
    store.add_message(c.id, "assistant", "A1 regenerated", q1.id)  # takes A1's id
    with pytest.raises(StoreError, match="can no longer be undone"):
        o.undo(delete_q2)
    assert [m.content for m in store.messages(c.id)] == ["Q1", "A1 regenerated"]


def test_a_move_undone_after_its_folder_came_back_under_a_new_id(store: ConversationStore) -> None:
    o = store.organise
    work = o.create_folder("Work")
    a = store.create_conversation("A")
    b = store.create_conversation("B")
    o.move_chats([a.id, b.id], work.id)
    move_a_out = o.move_chats([a.id], None)
    delete_work = o.delete_folder(work.id)
    home = o.create_folder("Home")
    assert home.id == work.id  # (the id again)
    o.undo(delete_work)
    o.undo(move_a_out)
    names = {f.id: f.name for f in o.folders()}
    assert names[store.conversation(a.id).folder_id] == "Work"
    assert names[store.conversation(b.id).folder_id] == "Work"


def test_a_subfolder_undone_after_its_parent_came_back_under_a_new_id(store: ConversationStore) -> None:
    o = store.organise
    top = o.create_folder("Top")
    sub = o.create_folder("Sub", top.id)
    c = store.create_conversation("C")
    o.move_chats([c.id], sub.id)
    delete_sub = o.delete_folder(sub.id)
    delete_top = o.delete_folder(top.id)
    o.create_folder("Other")  # takes Top's id
    o.undo(delete_top)
    o.undo(delete_sub)
    by_id = {f.id: f for f in o.folders()}
    back_sub = by_id[store.conversation(c.id).folder_id]
    assert back_sub.name == "Sub" and by_id[back_sub.parent_id].name == "Top"


def test_undoing_a_delete_leaves_an_answer_kept_again_since_as_it_is(store: ConversationStore) -> None:
    o = store.organise
    c = store.create_conversation("x")
    q = store.add_message(c.id, "user", "Q")
    store.add_message(c.id, "assistant", "A", q.id)
    asked = store.comparisons.create(c.id, q.id, ["m1", "m2"], {"seed": 1})
    answer = asked.answers[1]
    store.comparisons.set_answer(answer.id, "from m2")
    kept = store.add_message(c.id, "assistant", "from m2", q.id)
    store.comparisons.keep(answer.id, kept.id)
    delete_kept = o.delete_messages(kept.id)
    kept_again = store.add_message(c.id, "assistant", "from m2", q.id)
    store.comparisons.keep(answer.id, kept_again.id)
    o.undo(delete_kept)
    assert store.comparisons.of_conversation(c.id)[0].answers[1].kept_message_id == kept_again.id
    assert sorted(m.content for m in store.messages(c.id)) == ["A", "Q", "from m2", "from m2"]


def test_an_undo_never_touches_a_new_chat_that_took_the_id_of_one_deleted_for_good(store: ConversationStore) -> None:
    """SQLite gives a purged chat's id to the next new chat: an undo from before the purge must say it can
    no longer be done, never move, restore, archive or fill the new chat."""
    o = store.organise
    keep = store.create_conversation("keep")
    a = store.create_conversation("A")
    q = store.add_message(a.id, "user", "question in A")
    store.add_message(a.id, "assistant", "answer in A", q.id)
    work = o.create_folder("Work")
    moved = o.move_chats([a.id], work.id)
    deleted_message = o.delete_messages(q.id)
    deleted_folder = o.delete_folder(work.id)  # A goes to the Trash with its folder
    assert o.empty_trash() == 1
    b = store.create_conversation("B brand new")
    assert b.id == a.id  # (the purged chat's id, given again: why this test exists)

    o.undo(deleted_folder)  # the folder comes back, empty: its chat is gone for good
    for undo in (deleted_message, moved):
        with pytest.raises(StoreError, match="can no longer be undone"):
            o.undo(undo)
    now = store.conversation(b.id)
    assert (now.title, now.folder_id, now.deleted_at) == ("B brand new", None, None)
    assert store.messages(b.id) == [] and [f.name for f in o.folders()] == ["Work"]
    assert [c.id for c in store.conversations()] == [b.id, keep.id]
