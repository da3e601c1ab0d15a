"""Chats kept in order (storage/organise.py): folders nested one level, pins, archive, moving chats, and an
Undo for each change a user may regret, on a real SQLite file reopened where it matters."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember_chat.engine.errors import StoreError
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.organise import Folder, Undo
from tests.helpers.clock import Clock


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path, clock: Clock):
    s = ConversationStore(tmp_path / "chats.sqlite3", clock=clock)
    yield s
    s.close()


def chats(store: ConversationStore, *titles: str) -> list[int]:
    out = []
    for t in titles:
        c = store.create_conversation(t)
        store.add_message(c.id, "user", f"hello from {t}")
        out.append(c.id)
    return out


def test_a_conversation_built_by_hand_keeps_working_with_the_new_fields() -> None:
    from ember_chat.engine.storage.records import Conversation

    c = Conversation(1, "t", None, "", {}, 1.0, 2.0, None)
    assert (c.folder_id, c.pinned, c.archived_at, c.deleted_at) == (None, False, None, None)


def test_folders_nest_one_level_keep_their_order_and_are_kept_on_disk(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "chats.sqlite3"
    s = ConversationStore(path, clock=clock)
    org = s.organise
    work = org.create_folder("Work")
    home = org.create_folder("  Home  ")
    sub = org.create_folder("Reports", parent_id=work.id)
    assert isinstance(work, Folder) and home.name == "Home" and sub.parent_id == work.id
    with pytest.raises(StoreError, match="Folders nest one level"):
        org.create_folder("Deeper", parent_id=sub.id)
    with pytest.raises(StoreError, match="name"):
        org.create_folder("   ")
    with pytest.raises(StoreError, match="name"):
        org.rename_folder(home.id, "")
    org.rename_folder(home.id, "Private")
    org.set_collapsed(work.id, True)
    org.move_folder(home.id, None, 0)  # Private first among the top-level folders
    s.close()

    s = ConversationStore(path, clock=clock)
    folders = s.organise.folders()
    top = [f for f in folders if f.parent_id is None]
    assert [f.name for f in top] == ["Private", "Work"]
    assert [(f.name, f.collapsed) for f in folders if f.id == work.id] == [("Work", True)]
    assert [f.name for f in folders if f.parent_id == work.id] == ["Reports"]
    # a folder with subfolders cannot go under another; a subfolder can move to the top
    with pytest.raises(StoreError, match="Folders nest one level"):
        s.organise.move_folder(work.id, top[0].id, 0)
    s.organise.move_folder(sub.id, None, 5)
    assert [f.parent_id for f in s.organise.folders() if f.id == sub.id] == [None]
    s.close()


def test_moving_chats_into_a_folder_and_undo(store: ConversationStore) -> None:
    a, b, c = chats(store, "A", "B", "C")
    work = store.organise.create_folder("Work")
    before = {x.id: x.updated_at for x in store.conversations()}
    first = store.organise.move_chats([a], work.id)
    undo = store.organise.move_chats([a, b, c], work.id)
    assert isinstance(undo, Undo) and undo.label == "Moved 3 chats to “Work”."
    assert first.label == "Moved “A” to “Work”."
    assert {x.id: x.folder_id for x in store.conversations()} == {a: work.id, b: work.id, c: work.id}
    # organising is not activity: the order by newest activity stays
    assert {x.id: x.updated_at for x in store.conversations()} == before
    store.organise.undo(undo)
    assert {x.id: x.folder_id for x in store.conversations()} == {a: work.id, b: None, c: None}
    out = store.organise.move_chats([a], None)
    assert out.label == "Moved “A” out of its folder."
    assert store.conversation(a).folder_id is None
    with pytest.raises(StoreError, match="folder"):
        store.organise.move_chats([a], 9999)


def test_moving_chats_out_of_a_project_says_the_project(store: ConversationStore) -> None:
    """(Issue 34: a chat moved out of a project said "Moved “A” out of its folder.")"""
    from ember_chat.engine.projects.records import ProjectStore

    a, b, c = chats(store, "A", "B", "C")
    project = ProjectStore(store).create("Client A")
    work = store.organise.create_folder("Work")
    store.organise.move_chats([a, b], project.folder_id)
    store.organise.move_chats([c], work.id)
    assert store.organise.move_chats([a], None).label == "Moved “A” out of the project “Client A”."
    store.organise.move_chats([a], project.folder_id)
    assert store.organise.move_chats([a, b], None).label == "Moved 2 chats out of the project “Client A”."
    store.organise.move_chats([a], project.folder_id)
    assert store.organise.move_chats([a, c], None).label == "Moved 2 chats out of their folders."
    assert store.organise.move_chats([b], None).label == "Moved “B” out of its folder."  # (in none: as before)


def test_pins_and_archive_with_undo_and_what_the_list_and_search_show(store: ConversationStore) -> None:
    a, b, c = chats(store, "Alpha", "Beta", "Gamma")
    pin = store.organise.set_pinned([a, b], True)
    assert pin.label == "Pinned 2 chats."
    assert [x.pinned for x in map(store.conversation, (a, b, c))] == [True, True, False]
    store.organise.undo(pin)
    assert not any(x.pinned for x in map(store.conversation, (a, b, c)))

    arch = store.organise.archive_chats([b], True)
    assert arch.label == "Archived “Beta”."
    assert store.conversation(b).archived_at is not None
    assert [x.id for x in store.conversations()] == [c, a]  # newest activity first, archived left out
    assert [x.id for x in store.conversations(archived=True)] == [b]
    assert {h.conversation_id for h in store.search("hello")} == {a, b, c}  # archived chats are found
    store.organise.undo(arch)
    assert [x.id for x in store.conversations()] == [c, b, a]
    assert store.conversations(archived=True) == []

    store.organise.archive_chats([b], True)
    back = store.organise.archive_chats([b], False)
    assert back.label == "Moved “Beta” out of the archive."
    assert store.conversation(b).archived_at is None


def test_trashed_chats_are_neither_listed_nor_found(store: ConversationStore) -> None:
    a, b = chats(store, "Kept", "Gone")
    store.organise.archive_chats([a], True)
    store.organise.trash_chats([a, b])
    assert store.conversations() == [] and store.conversations(archived=True) == []
    assert store.search("hello") == []


def test_a_search_within_a_folder_finds_its_chats_and_its_subfolders_chats_only(store: ConversationStore) -> None:
    top, sub, other, loose = chats(store, "Top", "Sub", "Other", "Loose")
    work = store.organise.create_folder("Work")
    inner = store.organise.create_folder("Drafts", work.id)
    elsewhere = store.organise.create_folder("Home")
    store.organise.move_chats([top], work.id)
    store.organise.move_chats([sub], inner.id)
    store.organise.move_chats([other], elsewhere.id)
    assert {h.conversation_id for h in store.search("hello")} == {top, sub, other, loose}
    assert {h.conversation_id for h in store.search("hello", within=work.id)} == {top, sub}
    assert {h.conversation_id for h in store.search("hello", within=inner.id)} == {sub}
    assert {h.conversation_id for h in store.search("hello", within=elsewhere.id)} == {other}
    store.organise.trash_chats([sub])
    assert {h.conversation_id for h in store.search("hello", within=work.id)} == {top}
    store.organise.delete_folder(elsewhere.id)
    assert store.search("hello", within=elsewhere.id) == []  # (a folder gone: nothing, no error)


def test_the_undo_of_an_older_change_is_refused_with_a_sentence_when_its_folder_is_gone(
    store: ConversationStore,
) -> None:
    (a,) = chats(store, "A")
    work = store.organise.create_folder("Work")
    store.organise.move_chats([a], work.id)
    out = store.organise.move_chats([a], None)
    store.organise.delete_folder(work.id)
    undo_move_out = out
    with pytest.raises(StoreError, match="can no longer be undone"):
        store.organise.undo(undo_move_out)
    assert store.conversation(a).folder_id is None
