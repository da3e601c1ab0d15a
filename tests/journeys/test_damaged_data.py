"""Damaged files never stop Ember: the app and the CLI start, say what happened, and keep what can be
kept."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.conversations import SCHEMA_VERSION, ConversationStore
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.recovery import open_conversations
from tests.helpers.entry_point import ember_chat
from tests.helpers.paths import REPO

ROOT = REPO


def test_app_starts_with_a_damaged_settings_file_and_says_so(
    qtbot: QtBot, paths: AppPaths, make_window: Callable[..., MainWindow]
) -> None:
    paths.settings_file.parent.mkdir(parents=True, exist_ok=True)
    paths.settings_file.write_text(json.dumps({"theme": "dark", "temperature": "hot", "context_length": 10}))
    w = make_window()
    assert w.banner.isVisible()
    text = w.banner.text()
    assert "temperature" in text and "context_length" in text and "default" in text
    assert w.settings.theme == "dark" and w.settings.temperature == 0.7  # the good value kept, the bad one reset


def test_app_starts_with_an_unreadable_settings_file(
    qtbot: QtBot, paths: AppPaths, make_window: Callable[..., MainWindow]
) -> None:
    paths.settings_file.parent.mkdir(parents=True, exist_ok=True)
    paths.settings_file.write_bytes(b"\x00\xff garbage")
    w = make_window()
    assert "could not be read" in w.banner.text() and "settings.damaged-" in w.banner.text()
    assert any(p.name.startswith("settings.damaged-") for p in paths.config_dir.iterdir())


def test_cli_says_what_was_wrong_with_the_settings_and_carries_on(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "settings.json").write_text(json.dumps({"top_k": -5}))
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "EMBER_DATA_DIR": str(tmp_path / "data"),
        "EMBER_CONFIG_DIR": str(config),
    }
    out = subprocess.run([ember_chat(), "models", "list", "--json"],
                         capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "top_k must be between 0 and 100000, got -5" in out.stderr and "default (40)" in out.stderr
    assert json.loads(out.stdout)[0]["name"] == "starter"


def test_damaged_connections_and_model_settings_are_reported_in_the_window_and_the_cli(
    qtbot: QtBot, paths: AppPaths, make_window: Callable[..., MainWindow]
) -> None:
    """Both files are set aside (never replaced silently), and both the banner and `ember-chat remote
    list` say so, naming where the damaged copy went."""
    paths.config_dir.mkdir(parents=True, exist_ok=True)
    (paths.config_dir / "connections.json").write_text("{not json")
    (paths.config_dir / "model_settings.json").write_text("[also not")
    w = make_window()
    text = w.banner.text()
    assert "connections.damaged-" in text and "model_settings.damaged-" in text
    (paths.config_dir / "connections.json").write_text(json.dumps({"connections": [{"name": 5}]}))
    env = {**os.environ, "EMBER_DATA_DIR": str(paths.data_dir), "EMBER_CONFIG_DIR": str(paths.config_dir)}
    out = subprocess.run([ember_chat(), "remote", "list"],
                         capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "connections.json" in out.stderr and "kept in the file" in out.stderr


# ----- the chat database


def _chats(path: Path, n: int = 3) -> None:
    s = ConversationStore(path)
    for i in range(n):
        c = s.create_conversation(f"chat {i}")
        q = s.add_message(c.id, "user", f"question {i}")
        s.add_message(c.id, "assistant", f"answer {i}", parent_id=q.id, metrics={"ttft_s": 0.1})
    s.close()


def _aside(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if ".damaged-" in p.name and p.suffix == ".sqlite3"]


@pytest.mark.parametrize(
    "damage",
    ["not a database", "truncated", "newer schema", "failed migration", "damaged page"],
)
def test_a_damaged_database_is_set_aside_and_what_is_readable_recovered(tmp_path: Path, damage: str) -> None:
    db = tmp_path / "chats.sqlite3"
    expect_recovered = damage in ("newer schema", "failed migration", "damaged page")
    if damage == "not a database":
        db.write_bytes(b"this is not SQLite at all, just text " * 200)
    else:
        _chats(db, n=40 if damage == "damaged page" else 3)
        raw = sqlite3.connect(db)
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if damage == "newer schema":
            raw.execute("PRAGMA user_version = 99")
        elif damage == "failed migration":  # an old (v1) file whose v2 step cannot run: the column exists
            raw.execute("PRAGMA user_version = 1")
        raw.close()
        if damage == "truncated":
            db.write_bytes(db.read_bytes()[:1500])
        elif damage == "damaged page":  # scribble over one page in the middle of the file
            data = bytearray(db.read_bytes())
            page = 4096
            mid = (len(data) // page // 2) * page
            data[mid : mid + page] = b"\xde\xad" * (page // 2)
            db.write_bytes(bytes(data))
    opened = open_conversations(db)
    try:
        assert opened.notice is not None and opened.moved_to is not None and opened.moved_to.exists()
        assert str(opened.moved_to) in opened.notice and _aside(tmp_path) == [opened.moved_to]
        store = opened.store
        assert store.schema_version == SCHEMA_VERSION  # a fresh, working database in its place
        if expect_recovered:
            assert opened.recovered_messages > 0 and "recovered" in opened.notice
            first = store.conversations()[-1]
            thread = store.thread(first.id)
            assert [m.role for m in thread][:2] == ["user", "assistant"] and thread[0].content.startswith("question")
            assert store.search("question")  # full-text search rebuilt for the recovered messages
        else:
            assert store.conversations() == [] and "nothing in it could be read" in opened.notice
        c = store.create_conversation("new")  # and it takes new chats
        store.add_message(c.id, "user", "hello again")
    finally:
        opened.store.close()


@pytest.mark.slow
def test_a_locked_or_unwritable_database_is_left_alone(tmp_path: Path) -> None:
    db = tmp_path / "chats.sqlite3"
    _chats(db)
    before = db.read_bytes()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        opened = open_conversations(db)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert opened.moved_to is None and "in memory" in opened.notice and "locked" in opened.notice
    opened.store.create_conversation("kept in memory")  # the window still works
    opened.store.close()
    assert db.read_bytes() == before and _aside(tmp_path) == []

    folder = tmp_path / "readonly"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        if os.access(folder, os.W_OK):  # root ignores permissions: make the path unopenable instead
            target = folder / "is-a-directory.sqlite3"
            target.mkdir()
        else:
            target = folder / "chats.sqlite3"
        opened = open_conversations(target)
        assert opened.moved_to is None and "in memory" in opened.notice
        opened.store.close()
    finally:
        folder.chmod(0o700)


def test_app_starts_with_a_damaged_database_and_shows_the_recovered_chats(
    qtbot: QtBot, paths: AppPaths, make_window: Callable[..., MainWindow]
) -> None:
    paths.data_dir.mkdir(parents=True, exist_ok=True)
    _chats(paths.database)
    raw = sqlite3.connect(paths.database)
    raw.execute("PRAGMA user_version = 99")  # written by a newer Ember
    raw.close()
    w = make_window()
    assert w.banner.isVisible() and "newer Ember" in w.banner.text() and "3 chats with 6 messages" in w.banner.text()
    assert len(w.conversations.chat_ids()) == 3
    assert any(".damaged-" in p.name for p in paths.data_dir.iterdir())


def test_app_starts_with_a_file_that_is_not_a_database(
    qtbot: QtBot, paths: AppPaths, make_window: Callable[..., MainWindow]
) -> None:
    paths.data_dir.mkdir(parents=True, exist_ok=True)
    paths.database.write_bytes(b"\x00garbage, not SQLite" * 100)
    w = make_window()
    assert "nothing in it could be read" in w.banner.text() and ".damaged-" in w.banner.text()
    assert len(w.conversations.chat_ids()) == 0 and w.store.schema_version == SCHEMA_VERSION


@pytest.mark.slow
def test_app_starts_with_a_locked_database_and_keeps_chats_in_memory(
    qtbot: QtBot, paths: AppPaths, make_window: Callable[..., MainWindow]
) -> None:
    paths.data_dir.mkdir(parents=True, exist_ok=True)
    _chats(paths.database)
    holder = sqlite3.connect(paths.database, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        w = make_window()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "in memory" in w.banner.text() and "locked" in w.banner.text()
    assert not any(".damaged-" in p.name for p in paths.data_dir.iterdir())  # nothing moved: not damaged


# ----- a full disk (or a read-only folder) while chatting


@pytest.mark.slow
def test_a_full_disk_never_stops_the_answer_and_saving_resumes(
    qtbot: QtBot, make_window: Callable[..., MainWindow], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.helpers.fake_backend import FakeBackend
    from tests.helpers.window import load, set_max_tokens

    w = make_window(lambda _ref: FakeBackend(n_tokens=400, delay_s=0.001))
    load(qtbot, w)
    set_max_tokens(w, 400)
    store = w.store
    real_update = store.update_message
    disk_full = [True]

    def update_message(*args: object, **kwargs: object) -> None:
        if disk_full[0]:
            raise sqlite3.OperationalError("database or disk is full")
        real_update(*args, **kwargs)

    monkeypatch.setattr(store, "update_message", update_message)
    errors: list[str] = []
    w.controller.error.connect(errors.append)
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=30_000):
        w.composer.editor.setPlainText("A long answer please")
        qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    assert w.side.metrics.output.text() == "400"  # the answer streamed to its end
    assert errors and "cannot save this answer right now (the disk is full)" in errors[0]
    assert "cannot save" in w.banner.text()
    answer = store.thread(w.controller.conversation_id)[-1]
    assert answer.role == "assistant" and not answer.complete  # not written yet; the question is
    shown = w.transcript.plain_text()
    disk_full[0] = False  # space is back: the retry writes the whole answer
    with qtbot.waitSignal(w.controller.notice, timeout=10_000) as saved:
        pass
    assert "Saving works again" in saved.args[0]
    answer = store.message(answer.id)
    # (what the window showed: the plain stream or its rendering, whichever it was at that moment)
    assert answer.complete and answer.metrics["output_tokens"] == 400 and answer.content.split("**")[0] in shown


def test_a_message_that_cannot_be_saved_is_not_sent_and_stays_in_the_box(
    qtbot: QtBot, make_window: Callable[..., MainWindow], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.helpers.window import load

    w = make_window()
    load(qtbot, w)

    def read_only(*args: object, **kwargs: object) -> None:
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(w.store, "create_conversation", read_only)
    w.composer.editor.setPlainText("Keep me")
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    assert not w.controller.generating and w.composer.editor.toPlainText() == "Keep me"
    assert "cannot save your message (the data folder cannot be written)" in w.banner.text()


def test_an_answers_tool_calls_survive_recovery(tmp_path: Path) -> None:
    """A damaged database's answers keep the tool calls they made (their results lived in another
    table, which is not read back)."""
    from ember_chat.engine.core.tools import ToolCall

    db = tmp_path / "chats.sqlite3"
    s = ConversationStore(db)
    c = s.create_conversation("calls")
    question = s.add_message(c.id, "user", "What time is it?")
    answer = s.add_message(c.id, "assistant", "", parent_id=question.id)
    s.set_tool_calls(answer.id, [ToolCall("abc123def", "current_datetime", {})])
    s.close()
    raw = sqlite3.connect(db)
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw.execute("PRAGMA user_version = 99")  # a file this Ember cannot use as it is: recovered
    raw.close()
    opened = open_conversations(db)
    try:
        assert opened.recovered_messages == 2
        thread = opened.store.thread(opened.store.conversations()[0].id)
        assert [call.name for call in thread[1].tool_calls] == ["current_datetime"]
    finally:
        opened.store.close()
