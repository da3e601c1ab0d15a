"""A file that cannot be imported says what is wrong and where, and writes nothing (rows counted in the
real SQLite file through a connection of its own)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ember_chat.engine.storage import importing
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.importing import ImportFailed, import_chats
from tests.helpers.chatgpt_export import rows
from tests.helpers.import_fixtures import many, photosynthesis


@pytest.fixture
def store(tmp_path: Path) -> ConversationStore:
    s = ConversationStore(tmp_path / "chats.sqlite3")
    yield s
    s.close()


def refused(store: ConversationStore, path: Path) -> str:
    with pytest.raises(ImportFailed) as info:
        import_chats(store, path)
    assert rows(store.path) == dict.fromkeys(rows(store.path), 0)
    message = str(info.value)
    assert str(path.name) in message and "Traceback" not in message and "Error" not in message
    return message


def test_not_json(store: ConversationStore, tmp_path: Path) -> None:
    path = tmp_path / "notes.json"
    path.write_text("Dear diary,\nnot JSON at all", encoding="utf-8")
    message = refused(store, path)
    assert "not JSON" in message and "line 1" in message


def test_truncated_json(store: ConversationStore, tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    whole = json.dumps(many(5), indent=1)
    path.write_text(whole[: len(whole) // 2], encoding="utf-8")
    message = refused(store, path)
    assert "ends early" in message and "line" in message


def test_empty_file(store: ConversationStore, tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    path.write_bytes(b"")
    assert "is empty" in refused(store, path)


def test_not_text(store: ConversationStore, tmp_path: Path) -> None:
    path = tmp_path / "photo.json"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe")
    assert "not a text file" in refused(store, path)


@pytest.mark.parametrize(
    "data",
    [{"hello": "world"}, [1, 2, 3], "just a string", [], {"conversations": "none"}],
    ids=["object", "numbers", "string", "empty-list", "bad-wrapper"],
)
def test_wrong_shape(store: ConversationStore, tmp_path: Path, data: object) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    message = refused(store, path)
    assert "ChatGPT" in message and "Ember" in message


def test_a_node_pointing_at_a_missing_parent_names_the_chat(store: ConversationStore, tmp_path: Path) -> None:
    bad, names = photosynthesis()
    bad["mapping"][names["a3"]]["parent"] = "no-such-node"
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([*many(3), bad, *many(2)]), encoding="utf-8")  # good chats before it: not kept
    message = refused(store, path)
    assert "chat 4" in message and "Photosynthesis" in message and "no-such-node" in message


def test_a_loop_of_parents(store: ConversationStore, tmp_path: Path) -> None:
    bad, names = photosynthesis()
    bad["mapping"][names["u1"]]["parent"] = names["a1"]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([bad]), encoding="utf-8")
    assert "loop" in refused(store, path)


def test_a_chat_without_mapping_in_a_chatgpt_list(store: ConversationStore, tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    broken = many(3)
    broken[1]["mapping"] = ["not", "a", "tree"]
    path.write_text(json.dumps(broken), encoding="utf-8")
    message = refused(store, path)
    assert "chat 2" in message and "Chat 1" in message


def test_a_huge_file_is_refused_before_it_is_read(
    store: ConversationStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "conversations.json"
    with open(path, "wb") as f:  # sparse: no disk used
        f.truncate(importing.MAX_BYTES + 1)
    assert os.path.getsize(path) > importing.MAX_BYTES
    message = refused(store, path)
    assert "too large" in message and "GB" in message


def test_a_missing_file(store: ConversationStore, tmp_path: Path) -> None:
    with pytest.raises(ImportFailed) as info:
        import_chats(store, tmp_path / "gone.json")
    assert "cannot be read" in str(info.value)
