"""No store destroys a damaged file: an unreadable JSON file is set aside (never overwritten by the
next save) and reported; one bad entry costs only itself; the chat database's recovery closes what it
opened before it moves the file, survives bad values and is bounded in time. Real files throughout."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from ember_chat.engine.errors import EmberError
from ember_chat.engine.storage import recovery
from ember_chat.engine.storage.connections import Connection, ConnectionStore
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.model_settings import ModelLoadSettings, ModelSettingsStore
from ember_chat.engine.storage.recovery import open_conversations
from ember_chat.engine.storage.settings import Settings

GOOD_LOAD = {"n_ctx": 2048, "threads": 2, "threads_batch": 2, "gpu_layers": 0, "n_batch": 256,
             "flash_attn": False, "kv_cache_type": "f16", "use_mmap": True, "use_mlock": False}  # fmt: skip


def _aside(folder: Path, stem: str) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.startswith(f"{stem}.damaged-"))


# ----- model_settings.json and connections.json: an unreadable file


@pytest.mark.parametrize("content", [b"{not json", b"\x00\xff garbage", b"[1, 2]"])
def test_an_unreadable_model_settings_file_is_set_aside_and_reported(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "model_settings.json"
    path.write_bytes(content)
    store = ModelSettingsStore(path)
    assert store.get("tiny.gguf") is None  # the global settings are used
    problems = store.take_problems()
    aside = _aside(tmp_path, "model_settings")
    assert len(aside) == 1 and aside[0].read_bytes() == content and aside[0].suffix == ".json"
    assert len(problems) == 1 and str(path) in problems[0] and str(aside[0]) in problems[0]
    assert problems[0].startswith("The model load settings file") and problems[0].endswith(".")
    store.save("tiny.gguf", ModelLoadSettings(**GOOD_LOAD))  # a save afterwards leaves the set-aside copy
    assert aside[0].read_bytes() == content and _aside(tmp_path, "model_settings") == aside
    assert store.get("tiny.gguf") == ModelLoadSettings(**GOOD_LOAD) and store.take_problems() == []


@pytest.mark.parametrize("content", [b"{not json", b"\x00\xff garbage", b"[1, 2]", b'{"connections": {"a": 1}}'])
def test_an_unreadable_connections_file_is_set_aside_and_reported(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "connections.json"
    path.write_bytes(content)
    store = ConnectionStore(path)
    assert store.list() == []
    problems = store.take_problems()
    aside = _aside(tmp_path, "connections")
    assert len(aside) == 1 and aside[0].read_bytes() == content
    assert len(problems) == 1 and str(path) in problems[0] and str(aside[0]) in problems[0]
    assert problems[0].startswith("The connections file") and problems[0].endswith(".")
    store.save(Connection("work", "http://127.0.0.1:8000/v1"))
    assert aside[0].read_bytes() == content and _aside(tmp_path, "connections") == aside
    assert [c.name for c in store.list()] == ["work"]


def test_a_file_damaged_twice_in_one_second_keeps_both_copies(tmp_path: Path) -> None:
    path = tmp_path / "connections.json"
    for content in (b"{first", b"{second", b"{third"):
        path.write_bytes(content)
        assert ConnectionStore(path).list() == []
    assert sorted(p.read_bytes() for p in _aside(tmp_path, "connections")) == [b"{first", b"{second", b"{third"]


def test_a_damaged_file_that_cannot_be_moved_aside_is_never_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "model_settings.json"
    path.write_bytes(b"{damaged")
    real_replace = os.replace

    def refuse_to_move_it(src: Any, dst: Any) -> None:
        if Path(src) == path:
            raise PermissionError(13, "Permission denied")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", refuse_to_move_it)
    store = ModelSettingsStore(path)
    with pytest.raises(EmberError, match="not overwritten"):
        store.save("tiny.gguf", ModelLoadSettings(**GOOD_LOAD))
    assert path.read_bytes() == b"{damaged"
    assert "could not be moved aside (Permission denied)" in " ".join(store.take_problems())


# ----- one bad entry


def test_one_bad_connection_does_not_drop_the_others_and_stays_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "connections.json"
    bad = [
        {"name": "beta", "base_url": "http://b.example/v1", "read_timeout_s": "slow"},
        {"name": "gamma", "base_url": "http://c.example/v1", "verify_tls": "no"},  # a string is not a bool
        {"name": "delta"},  # no address
        "not a connection",
    ]
    good = [{"name": "alpha", "base_url": "http://a.example/v1"}, {"name": "zeta", "base_url": "http://z.example/v1"}]
    path.write_text(json.dumps({"connections": [good[0], *bad, good[1]], "future_key": [1]}))
    store = ConnectionStore(path)
    assert [c.name for c in store.list()] == ["alpha", "zeta"]
    assert [c.name for c in store.list()] == ["alpha", "zeta"]  # read again: each problem is said once
    problems = store.take_problems()
    assert len(problems) == 4 and all(str(path) in p and p.endswith(".") for p in problems)
    assert "'beta'" in problems[0] and "read timeout" in problems[0]
    assert "'gamma'" in problems[1] and "verify_tls" in problems[1]
    assert "'delta'" in problems[2] and "base_url" in problems[2]
    assert "number 5" in problems[3]
    assert all("kept in the file" in p for p in problems)
    # saving and removing others keeps the bad entries, as they were, for the user to fix
    store.save(Connection("omega", "http://o.example/v1"))
    store.remove("alpha")
    data = json.loads(path.read_text())
    assert [c["name"] for c in data["connections"] if isinstance(c, dict) and "base_url" in c][:2] == ["omega", "zeta"]
    assert all(b in data["connections"] for b in bad) and data["future_key"] == [1]
    assert [c.name for c in ConnectionStore(path).list()] == ["omega", "zeta"]
    assert _aside(tmp_path, "connections") == []  # nothing was damaged as a whole


def test_one_bad_model_entry_does_not_drop_the_others_and_stays_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "model_settings.json"
    bad = {
        "huge.gguf": {**GOOD_LOAD, "n_ctx": "huge"},
        "auto.gguf": {**GOOD_LOAD, "flash_attn": "yes"},
        "odd.gguf": {**GOOD_LOAD, "kv_cache_type": "q3"},
        "short.gguf": {"n_ctx": 1024},
        "five.gguf": 5,
    }
    path.write_text(json.dumps({"good.gguf": GOOD_LOAD, **bad, "gpu.gguf": {**GOOD_LOAD, "gpu_layers": -2}}))
    store = ModelSettingsStore(path)
    assert store.get("good.gguf") == ModelLoadSettings(**GOOD_LOAD)
    assert store.get("gpu.gguf") == ModelLoadSettings(**{**GOOD_LOAD, "gpu_layers": -2})  # "auto" is valid
    assert all(store.get(name) is None for name in bad)
    assert store.effective("huge.gguf", Settings()) == ModelLoadSettings.from_settings(Settings())
    problems = store.take_problems()  # every bad entry, whichever were asked for
    assert len(problems) == len(bad) and all(str(path) in p and p.endswith(".") for p in problems)
    for name, words in [("huge.gguf", "context length"), ("auto.gguf", "flash_attn"), ("odd.gguf", "q3"),
                        ("short.gguf", "threads"), ("five.gguf", "five.gguf")]:  # fmt: skip
        assert any(f"'{name}'" in p and words in p for p in problems), name
    assert store.take_problems() == []
    store.save("new.gguf", ModelLoadSettings(**GOOD_LOAD))
    data = json.loads(path.read_text())
    assert {k: data[k] for k in bad} == bad and data["new.gguf"] == ModelLoadSettings(**GOOD_LOAD).options()
    store.save("huge.gguf", ModelLoadSettings(**GOOD_LOAD))  # new settings for that model replace its bad ones
    assert store.get("huge.gguf") == ModelLoadSettings(**GOOD_LOAD)


# ----- the chat database


def _chats(path: Path, n: int = 3, words: int = 0) -> None:
    s = ConversationStore(path)
    for i in range(n):
        c = s.create_conversation(f"chat {i}")
        q = s.add_message(c.id, "user", f"question {i} " + "words " * words)
        s.add_message(c.id, "assistant", f"answer number {i} ends here " + "words " * words,
                      parent_id=q.id, metrics={"ttft_s": 0.1})  # fmt: skip
    s.close()


def _raw(path: Path, *statements: str) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    for sql in statements:
        db.execute(sql)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def _is_open(db: sqlite3.Connection) -> bool:
    try:
        db.execute("SELECT 1")
    except sqlite3.ProgrammingError:  # "Cannot operate on a closed database."
        return False
    return True


@pytest.mark.parametrize("damage", ["not a database", "newer schema", "failed migration"])
def test_a_failed_open_closes_its_connection_before_the_file_is_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    db = tmp_path / "chats.sqlite3"
    if damage == "not a database":
        db.write_bytes(b"this is not SQLite at all, just text " * 200)
    else:
        _chats(db)
        _raw(db, "PRAGMA user_version = 99" if damage == "newer schema" else "PRAGMA user_version = 1")
    connections: list[sqlite3.Connection] = []
    open_when_moved: list[str] = []
    real_connect, real_replace = sqlite3.connect, os.replace

    def recording_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connections.append(real_connect(*args, **kwargs))
        return connections[-1]

    def checking_replace(src: Any, dst: Any) -> None:
        open_when_moved.extend(f"{src}: connection {i}" for i, c in enumerate(connections) if _is_open(c))
        real_replace(src, dst)

    monkeypatch.setattr(sqlite3, "connect", recording_connect)
    monkeypatch.setattr(os, "replace", checking_replace)
    opened = open_conversations(db)
    try:
        assert opened.moved_to is not None and connections  # the failed open went through sqlite3.connect
        assert open_when_moved == []  # (Windows cannot move a file that is open)
        assert opened.store.schema_version > 0
    finally:
        opened.store.close()
    assert not any(_is_open(c) for c in connections)


def test_bad_json_and_other_bad_values_are_left_empty_during_recovery_and_counted(tmp_path: Path) -> None:
    db = tmp_path / "chats.sqlite3"
    _chats(db)  # chats 1-3; messages 1-6, the answers (2, 4, 6) with metrics
    _raw(
        db,
        "UPDATE conversations SET params = '{broken' WHERE id = 1",
        "UPDATE conversations SET params = '[1, 2]' WHERE id = 2",  # JSON, but not an object
        "UPDATE conversations SET created_at = 'yesterday' WHERE id = 3",
        "UPDATE messages SET metrics = 'not json' WHERE id = 2",
        "UPDATE messages SET metrics = '42' WHERE id = 4",
        "PRAGMA user_version = 99",  # written by a newer Ember: recovery copies every row
    )
    before = time.time()
    opened = open_conversations(db)
    store = opened.store
    try:
        assert (opened.recovered_conversations, opened.recovered_messages) == (3, 6)  # every row kept
        assert opened.repaired_values == 5 and "5 damaged values" in opened.notice
        params = {c.id: c.params for c in store.conversations()}  # (this raised on a bad value)
        assert params == {1: {}, 2: {}, 3: {}}
        assert store.conversation(3).created_at >= before
        assert [store.message(i).metrics for i in (2, 4, 6)] == [None, None, {"ttft_s": 0.1}]
        assert [m.content for m in store.thread(1)] == ["question 0 ", "answer number 0 ends here "]
    finally:
        store.close()


def test_a_bad_json_value_in_a_sound_database_never_stops_reading(tmp_path: Path) -> None:
    db = tmp_path / "chats.sqlite3"
    _chats(db, n=2)
    _raw(db, "UPDATE conversations SET params = '{broken' WHERE id = 1", "UPDATE messages SET metrics = '[' WHERE id=2")
    opened = open_conversations(db)  # quick_check finds nothing wrong: the file is opened as it is
    try:
        assert opened.notice is None
        assert {c.id: c.params for c in opened.store.conversations()} == {1: {}, 2: {}}
        assert [m.metrics for m in opened.store.thread(1)] == [None, None]
    finally:
        opened.store.close()


def _damage_the_page_holding(db: Path, text: bytes) -> None:
    data = bytearray(db.read_bytes())
    at = data.find(text)
    assert at > 0, text
    page = 4096
    start = at // page * page
    data[start : start + page] = b"\xde\xad" * (page // 2)
    db.write_bytes(bytes(data))


def _damaged_with_a_far_id(db: Path) -> None:
    """60 chats of long messages, one message numbered 10^12, and one page of messages scribbled over."""
    _chats(db, n=60, words=100)
    _raw(db, "INSERT INTO messages (id, conversation_id, role, content, created_at) VALUES (1000000000000, 1, "
             "'user', 'far away', 0)")  # fmt: skip
    _damage_the_page_holding(db, b"answer number 30 ends here")


@pytest.mark.timeout(60)
def test_recovery_reads_past_a_damaged_page_without_probing_every_number(tmp_path: Path) -> None:
    db = tmp_path / "chats.sqlite3"
    _damaged_with_a_far_id(db)
    started = time.monotonic()
    opened = open_conversations(db)
    try:
        assert time.monotonic() - started < 20
        assert opened.moved_to is not None and opened.recovered_conversations == 60
        assert 100 <= opened.recovered_messages < 121  # only the rows of the damaged page are lost
        assert opened.store.message(10**12).content == "far away"  # read after the damaged page
        assert "stopped" not in opened.notice
    finally:
        opened.store.close()


def test_recovery_stops_after_too_many_unreadable_numbers_and_says_what_was_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "chats.sqlite3"
    _damaged_with_a_far_id(db)
    monkeypatch.setattr(recovery, "SCAN_SKIP_LIMIT", 2)
    opened = open_conversations(db)
    try:
        assert opened.recovered_conversations == 60 and 0 < opened.recovered_messages < 100
        assert opened.unread and "messages from number" in opened.notice and "not recovered" in opened.notice
        assert str(opened.moved_to) in opened.notice
        with pytest.raises(KeyError):
            opened.store.message(10**12)
    finally:
        opened.store.close()


def test_recovery_stops_at_its_time_limit_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "chats.sqlite3"
    _damaged_with_a_far_id(db)
    monkeypatch.setattr(recovery, "SCAN_TIME_LIMIT_S", 0.0)
    opened = open_conversations(db)
    try:
        assert opened.recovered_messages == 0 and opened.unread
        assert "stopped after 0 seconds" in opened.notice and "not recovered" in opened.notice
        opened.store.create_conversation("a new chat")  # Ember starts, and works
    finally:
        opened.store.close()


def test_a_damaged_database_that_cannot_be_moved_is_left_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "chats.sqlite3"
    db.write_bytes(b"this is not SQLite at all, just text " * 200)

    def refuse(src: Any, dst: Any) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    opened = open_conversations(db)  # (this raised: Ember did not start)
    try:
        assert opened.moved_to is None and "could not be moved aside (Permission denied)" in opened.notice
        assert "in memory" in opened.notice and db.read_bytes().startswith(b"this is not SQLite")
        opened.store.create_conversation("kept in memory")
    finally:
        opened.store.close()


def test_renaming_a_connection_while_the_keychain_cannot_be_read_keeps_its_key(tmp_path: Path) -> None:
    """The key moves with a renamed connection; a keychain that cannot be read stops the rename with a
    clear error instead of losing the key."""
    import keyring

    from ember_chat.engine.errors import SecretStoreError
    from tests.helpers.file_keyring import UnreadableKeyring

    store = ConnectionStore(tmp_path / "connections.json")
    store.save(Connection("old", "http://127.0.0.1:8000/v1"), api_key="the-key")
    previous = keyring.get_keyring()
    keyring.set_keyring(UnreadableKeyring())
    try:
        with pytest.raises(SecretStoreError, match="keychain could not be read"):
            store.save(Connection("new", "http://127.0.0.1:8000/v1"), replaces="old")
    finally:
        keyring.set_keyring(previous)
    assert [c.name for c in store.list()] == ["old"] and store.endpoint("old").api_key == "the-key"
    store.save(Connection("new", "http://127.0.0.1:8000/v1"), replaces="old")
    assert [c.name for c in store.list()] == ["new"] and store.endpoint("new").api_key == "the-key"
    assert not store.has_key("old")
    store.remove("new")
