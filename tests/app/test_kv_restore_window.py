"""Issue 20's "done when", in the real window over a real chat database and the real saved conversation
caches: a long chat, Ember closed, opened again, a follow-up asked: the chat's evaluated prompt comes back
from its saved cache (a KV snapshot in the data folder) instead of being evaluated again, and *why this
speed* says so."""

from __future__ import annotations

from collections.abc import Callable

from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.window import load, send, set_max_tokens

LONG = " ".join(["the world is round and the sky is blue, you see."] * 7)


def test_a_long_chat_reopened_after_a_restart_is_restored_from_its_saved_cache(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    w = make_window()
    load(qtbot, w)
    w.side.params.temperature.setValue(0)
    set_max_tokens(w, 6)
    send(qtbot, w, LONG)
    chat = w.controller.conversation_id
    first = w.store.thread(chat)[-1].metrics
    assert first["prompt_tokens"] > 256 and first["prompt_tokens_restored"] == 0
    w.close()
    assert list((paths.data_dir / "kv-snapshots").glob("*.kvsnap"))  # written at quit

    again = make_window()  # the next day
    load(qtbot, again)
    again.chats.open_conversation(chat)
    send(qtbot, again, "And then?")
    m = again.store.thread(chat)[-1].metrics
    restored = m["prompt_tokens_restored"]
    assert restored >= first["prompt_tokens"] - 1 and m["prompt_tokens_reused"] >= restored
    evaluated = m["prompt_tokens"] - m["prompt_tokens_reused"]
    why = again.side.metrics.why.text()
    assert why.startswith(f"Prompt: {restored:,} tokens restored from a snapshot, {evaluated:,} evaluated")


def test_a_damaged_saved_cache_is_said_in_the_window_and_the_answer_comes_as_usual(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    folder = paths.data_dir / "kv-snapshots"
    folder.mkdir(parents=True)
    damaged = folder / f"{'0' * 40}.kvsnap"
    damaged.write_bytes(b"EMBER-KV" + b"\x00" * 64)  # cut off in the middle of its header
    w = make_window()
    load(qtbot, w)
    w.side.params.temperature.setValue(0)  # (sampled, an end of turn can come first)
    set_max_tokens(w, 4)
    send(qtbot, w, LONG)  # (a prompt long enough to look for a saved cache)
    assert w.store.thread(w.controller.conversation_id)[-1].metrics["output_tokens"] == 4
    assert not damaged.exists()
    text = w.banner.text()
    assert "saved conversation cache" in text and "was damaged" in text and "evaluated again" in text
