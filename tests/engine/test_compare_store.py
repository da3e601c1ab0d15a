"""Comparisons kept with their chat (engineer E's storage): a real SQLite file, reopened."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember_chat.engine.errors import StoreError
from ember_chat.engine.storage.comparisons import Comparison, ComparisonAnswer
from ember_chat.engine.storage.conversations import ConversationStore


def _chat(store: ConversationStore) -> tuple[int, int]:
    conv = store.create_conversation("Compare me")
    user = store.add_message(conv.id, "user", "Say hi")
    return conv.id, user.id


def test_a_comparison_and_its_answers_are_kept_and_read_back_after_reopening(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    store = ConversationStore(path)
    cid, prompt_id = _chat(store)
    settings = {"seed": 7, "params": {"temperature": 0.5}, "system_prompt": "Be brief."}
    made = store.comparisons.create(cid, prompt_id, ["tiny-a", "remote: Peer / gpt"], settings)
    assert isinstance(made, Comparison)
    assert [a.model for a in made.answers] == ["tiny-a", "remote: Peer / gpt"]
    assert [a.position for a in made.answers] == [0, 1]
    assert all(a.content == "" and a.error is None and a.kept_message_id is None for a in made.answers)
    first, second = made.answers
    store.comparisons.set_answer(first.id, "Hi there", metrics={"ttft_s": 0.1, "tokens": 3, "tok_s": 30.0})
    store.comparisons.set_answer(second.id, "", error="The server did not answer.")
    kept = store.add_message(cid, "assistant", "Hi there", prompt_id, metrics={"tokens": 3})
    store.comparisons.keep(first.id, kept.id)
    store.close()

    store = ConversationStore(path)
    (back,) = store.comparisons.of_conversation(cid)
    assert back.id == made.id and back.prompt_id == prompt_id and back.settings == settings
    assert back.created_at == made.created_at
    assert back.answers[0] == ComparisonAnswer(
        first.id, 0, "tiny-a", "Hi there", {"ttft_s": 0.1, "tokens": 3, "tok_s": 30.0}, None, kept.id
    )
    assert back.answers[1].error == "The server did not answer." and back.answers[1].metrics is None
    assert store.comparisons.of_prompt(prompt_id) == [back]
    assert store.comparisons.get(made.id) == back
    store.close()


def test_comparisons_are_listed_oldest_first_and_go_with_their_chat(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path / "chats.db")
    cid, prompt_id = _chat(store)
    other_cid, other_prompt = _chat(store)
    a = store.comparisons.create(cid, prompt_id, ["m1", "m2"], {})
    b = store.comparisons.create(cid, prompt_id, ["m1", "m3", "m4"], {})
    store.comparisons.create(other_cid, other_prompt, ["m1", "m2"], {})
    assert [c.id for c in store.comparisons.of_conversation(cid)] == [a.id, b.id]
    store.delete_conversation(cid)
    assert store.comparisons.of_conversation(cid) == []
    assert len(store.comparisons.of_conversation(other_cid)) == 1
    store.close()


def test_a_kept_message_deleted_leaves_the_answer_unkept(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path / "chats.db")
    cid, prompt_id = _chat(store)
    made = store.comparisons.create(cid, prompt_id, ["m1", "m2"], {})
    kept = store.add_message(cid, "assistant", "x", prompt_id)
    store.comparisons.keep(made.answers[1].id, kept.id)
    store.delete_message(kept.id)
    (back,) = store.comparisons.of_conversation(cid)
    assert back.answers[1].kept_message_id is None and back.answers[1].content == ""
    store.close()


def test_a_comparison_needs_two_to_four_models_and_a_known_answer(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path / "chats.db")
    cid, prompt_id = _chat(store)
    with pytest.raises(StoreError, match="two to four"):
        store.comparisons.create(cid, prompt_id, ["only-one"], {})
    with pytest.raises(StoreError, match="two to four"):
        store.comparisons.create(cid, prompt_id, ["a", "b", "c", "d", "e"], {})
    with pytest.raises(StoreError):
        store.comparisons.set_answer(12345, "text")
    assert store.comparisons.of_conversation(cid) == []
    store.close()


def test_damaged_json_in_a_stored_comparison_reads_as_empty(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path / "chats.db")
    cid, prompt_id = _chat(store)
    made = store.comparisons.create(cid, prompt_id, ["m1", "m2"], {"seed": 1})
    db, lock = store.shared_connection()
    with lock:
        db.execute("UPDATE comparisons SET settings = 'not json' WHERE id = ?", (made.id,))
        db.execute("UPDATE comparison_answers SET metrics = '[1' WHERE comparison_id = ?", (made.id,))
    (back,) = store.comparisons.of_conversation(cid)
    assert back.settings == {} and all(a.metrics is None for a in back.answers)
    store.close()
