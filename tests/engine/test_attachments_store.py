"""Attachments kept with messages in the real chat database: content-addressed blobs (deduplicated),
passages in real SQLite FTS5 (bm25), pruning, restoring on reopen, sources of an answer, export; and
the per-turn plan: whole when the text fits, else retrieval said out loud."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember_chat.engine.attachments import (
    RETRIEVAL,
    WHOLE,
    AttachmentStore,
    apply_plan,
    conversation_refs,
    plan_turn,
    read_attachment,
    read_attachment_bytes,
)
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.errors import AttachmentError
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.export import chat_as_json, chat_as_markdown
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.attachment_files import image_bytes, write_pdf

FACT_PAGE = 37


def words(text: str) -> int:
    """A stand-in tokenizer for planning arithmetic: one token per whitespace-separated word."""
    return len(text.split())


@pytest.fixture
def paths(tmp_path: Path) -> AppPaths:
    return AppPaths(tmp_path / "data", tmp_path / "config")


@pytest.fixture
def chats(paths: AppPaths) -> Iterator[ConversationStore]:
    store = ConversationStore(paths.database)
    yield store
    store.close()


def _book(tmp_path: Path, pages: int = 60) -> Path:
    filler = "The committee reviewed budgets, staffing and the schedule for the coming quarter in detail."
    texts = []
    for page in range(1, pages + 1):
        lines = [f"Chapter {page}."] + [filler] * 12
        if page == FACT_PAGE:
            lines.insert(5, "The lighthouse keeper's cat is named Marmalade and sleeps on the lamp.")
        texts.append("\n".join(lines))
    return write_pdf(tmp_path / "book.pdf", texts)


def test_saving_twice_keeps_one_blob_and_reopening_restores_the_message_attachments(
    tmp_path: Path, paths: AppPaths, chats: ConversationStore
) -> None:
    atts = AttachmentStore(paths, chats)
    doc = read_attachment(_book(tmp_path, 3))
    first, again = atts.save(doc), atts.save(doc)
    assert first == again and first.kind == "pdf" and first.pages == 3 and first.chars == len(doc.text)
    blob = paths.data_dir / "attachments" / doc.sha256[:2] / doc.sha256
    assert blob.read_text(encoding="utf-8") == doc.text
    conv = chats.create_conversation("c")
    msg = chats.add_message(conv.id, "user", "what is in it?")
    atts.link(msg.id, [first.id])
    chats.close()

    reopened = ConversationStore(paths.database)
    try:
        again_store = AttachmentStore(paths, reopened)
        (kept,) = again_store.of_message(msg.id)
        assert kept == first and again_store.text(kept) == doc.text
        assert again_store.of_messages([msg.id, 999]) == {msg.id: [first]}
    finally:
        reopened.close()


def test_prune_removes_what_no_message_refers_to(tmp_path: Path, paths: AppPaths, chats: ConversationStore) -> None:
    atts = AttachmentStore(paths, chats)
    kept = atts.save(read_attachment_bytes("kept.txt", b"kept words"))
    dropped = atts.save(read_attachment_bytes("dropped.txt", b"dropped words"))
    conv = chats.create_conversation("c")
    m1 = chats.add_message(conv.id, "user", "one")
    m2 = chats.add_message(conv.id, "user", "two", parent_id=m1.id)
    atts.link(m1.id, [kept.id])
    atts.link(m2.id, [dropped.id])
    assert atts.prune() == 0
    chats.delete_message(m2.id)
    assert atts.prune() == 1
    assert not atts.blob_path(dropped.sha256).exists() and atts.blob_path(kept.sha256).exists()
    assert atts.search([dropped.id], "dropped") == []
    with pytest.raises(AttachmentError, match="no longer stored"):
        atts.get(dropped.id)
    assert atts.text(atts.get(kept.id)) == "kept words"


def test_fts5_finds_the_passage_with_the_fact_and_its_page(
    tmp_path: Path, paths: AppPaths, chats: ConversationStore
) -> None:
    atts = AttachmentStore(paths, chats)
    book = atts.save(read_attachment(_book(tmp_path)))
    assert atts.chunk_count(book.id) >= 60
    best = atts.search([book.id], "What is the lighthouse keeper's cat called?", limit=3)[0]
    assert "Marmalade" in best.text and best.page == FACT_PAGE
    assert atts.search([book.id], 'AND OR NOT ( " *') == []  # FTS5 syntax in a question is only words


def test_a_file_that_fits_is_read_whole_in_a_block_that_names_it(paths: AppPaths, chats: ConversationStore) -> None:
    atts = AttachmentStore(paths, chats)
    note = atts.save(read_attachment_bytes("note.md", b"# Plan\n\nShip on Friday."))
    plan = plan_turn([atts.ref(note)], "when do we ship?", 1000, words, atts)
    (item,) = plan.items
    assert item.mode == WHOLE and item.name == "note.md" and item.used == item.total == 1
    assert item.tokens == words(plan.prompt_text) and plan.sources == []
    assert plan.prompt_text.startswith("<<<file: note.md (markdown, whole)>>>\n# Plan")
    assert plan.prompt_text.endswith("<<<end of file: note.md>>>")
    messages = [ChatMessage("user", "when do we ship?", attachments=(atts.ref(note),))]
    (expanded,) = apply_plan(messages, plan)
    assert expanded.content == plan.prompt_text + "\n\nwhen do we ship?"


def test_a_file_too_long_is_retrieved_within_the_budget_and_says_so(
    tmp_path: Path, paths: AppPaths, chats: ConversationStore
) -> None:
    atts = AttachmentStore(paths, chats)
    small = atts.save(read_attachment_bytes("small.txt", b"The meeting is on Tuesday."))
    book = atts.save(read_attachment(_book(tmp_path)))
    refs = [atts.ref(small), atts.ref(book)]
    plan = plan_turn(refs, "What is the lighthouse keeper's cat called?", 800, words, atts)
    whole, retrieved = plan.items
    assert whole.mode == WHOLE and retrieved.mode == RETRIEVAL
    assert 0 < retrieved.used < retrieved.total == atts.chunk_count(book.id)
    assert retrieved.describe() == f"too long to read whole: {retrieved.used} of {retrieved.total} passages used"
    assert whole.tokens + retrieved.tokens <= 800
    assert len(plan.sources) == retrieved.used
    fact = next(s for s in plan.sources if "Marmalade" in s.text)
    assert fact.page == FACT_PAGE and fact.name == "book.pdf"
    assert f"[passage {fact.chunk + 1}, page {FACT_PAGE}]" in plan.prompt_text
    assert (
        f"book.pdf (pdf) is too long to read whole: {retrieved.used} of {retrieved.total} passages" in plan.prompt_text
    )

    conv = chats.create_conversation("c")
    answer = chats.add_message(conv.id, "assistant", "Marmalade.")
    atts.record_sources(answer.id, plan)
    assert atts.sources_of(answer.id) == plan.sources
    reopened = atts.plan_of(answer.id)
    assert reopened is not None and reopened.items == plan.items


def test_no_room_at_all_is_said_not_hidden(paths: AppPaths, chats: ConversationStore) -> None:
    atts = AttachmentStore(paths, chats)
    doc = atts.save(read_attachment_bytes("long.txt", ("word " * 5000).encode()))
    plan = plan_turn([atts.ref(doc)], "word", 10, words, atts)
    (item,) = plan.items
    assert item.mode == RETRIEVAL and item.used == 0 and item.total > 1
    assert "(no room for any passage this turn)" in plan.prompt_text


def test_every_attachment_of_the_chat_stays_in_its_own_message(paths: AppPaths, chats: ConversationStore) -> None:
    atts = AttachmentStore(paths, chats)
    a = atts.save(read_attachment_bytes("a.txt", b"alpha facts"))
    b = atts.save(read_attachment_bytes("b.txt", b"beta facts"))
    messages = [
        ChatMessage("user", "first", attachments=(atts.ref(a),)),
        ChatMessage("assistant", "ok"),
        ChatMessage("user", "second", attachments=(atts.ref(b), atts.ref(a))),
    ]
    refs = conversation_refs(messages)
    assert [r.name for r in refs] == ["a.txt", "b.txt"]
    first, answer, second = apply_plan(messages, plan_turn(refs, "second", 1000, words, atts))
    assert "alpha facts" in first.content and answer.content == "ok"
    assert "beta facts" in second.content and "alpha facts" not in second.content


def test_export_includes_attachments_and_markdown_names_them(paths: AppPaths, chats: ConversationStore) -> None:
    atts = AttachmentStore(paths, chats)
    note = atts.save(read_attachment_bytes("note.txt", b"remember the milk"))
    png = image_bytes("PNG")
    shot = atts.save(read_attachment_bytes("shot.png", png))
    conv = chats.create_conversation("Shopping")
    msg = chats.add_message(conv.id, "user", "see these")
    atts.link(msg.id, [note.id, shot.id])
    thread = chats.thread(conv.id)
    entries = atts.export_entries(m.id for m in thread)
    data = json.loads(chat_as_json(chats.conversation(conv.id), thread, entries))
    text_entry, image_entry = data["messages"][0]["attachments"]
    assert text_entry["name"] == "note.txt" and text_entry["text"] == "remember the milk"
    assert text_entry["sha256"] == note.sha256 and text_entry["kind"] == "text"
    assert base64.b64decode(image_entry["data_base64"]) == png and image_entry["kind"] == "image"
    markdown = chat_as_markdown(chats.conversation(conv.id), thread, entries)
    assert "- 📎 note.txt (text, 17 bytes)" in markdown and "- 📎 shot.png (image," in markdown


def test_a_question_without_matching_words_gets_the_first_passages_and_says_so(
    paths: AppPaths, chats: ConversationStore
) -> None:
    atts = AttachmentStore(paths, chats)
    doc = atts.save(
        read_attachment_bytes("long.txt", "\n\n".join(f"Part {i}. " + "lorem ipsum " * 90 for i in range(30)).encode())
    )
    plan = plan_turn([atts.ref(doc)], "summarise this", 600, words, atts)
    (item,) = plan.items
    assert item.mode == RETRIEVAL and item.used >= 1
    assert [s.chunk for s in plan.sources] == list(range(item.used))  # the beginning, in order
    assert "its first ones (none has the question's words)" in plan.prompt_text


def test_room_left_after_the_matches_goes_to_the_passages_around_them(
    tmp_path: Path, paths: AppPaths, chats: ConversationStore
) -> None:
    atts = AttachmentStore(paths, chats)
    book = atts.save(read_attachment(_book(tmp_path)))
    question = "What is the lighthouse keeper's cat called?"
    (best,) = [h for h in atts.search([book.id], question, 50) if "Marmalade" in h.text]
    plan = plan_turn([atts.ref(book)], question, 1000, words, atts)
    assert {s.chunk for s in plan.sources} >= {best.seq - 1, best.seq, best.seq + 1}
    assert [s.chunk for s in plan.sources] == sorted(s.chunk for s in plan.sources)  # in document order
    assert plan.items[0].tokens <= 1000


def test_a_pdf_passage_names_the_page_its_text_is_on(tmp_path: Path, paths: AppPaths, chats: ConversationStore) -> None:
    """A chat attachment's passages never run across a page start (chunking.chunk_text): page 1 and the
    fact at the top of page 2 fit in one passage, which said "page 1" for the fact."""
    atts = AttachmentStore(paths, chats)
    first = "\n".join(f"Line {i} of the opening page says little." for i in range(15))
    pdf = write_pdf(tmp_path / "two.pdf", [first, "The ferry leaves at 07:40 from pier 9.", "12"])
    stored = atts.save(read_attachment(pdf))
    assert atts.chunk_count(stored.id) == 2  # (page 3's number alone is no passage: it ends page 2's)
    best = atts.search([stored.id], "When does the ferry leave?", limit=1)[0]
    assert best.page == 2 and best.text == "The ferry leaves at 07:40 from pier 9.\n\n12"
