"""Attachments through the engine service with a real (tiny) llama.cpp model and its tokenizer: a file
that fits goes into the prompt whole, a file that does not is retrieved within the budget (said in the
AttachmentsPlanned event, never a silent cut, never a trimmed conversation), and `count_tokens` uses the
model's tokenizer."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember_chat.engine.attachments import RETRIEVAL, WHOLE, AttachmentStore, read_attachment_bytes
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.inference.service.engine import EngineService, GenerationRequest
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.gguf_factory import TinySpec, says, write_tiny_model
from tests.helpers.listeners import Loaded
from tests.helpers.sinks import RecordingSink

WAIT_S = 30
FACT = "The spare key is hidden under the blue flowerpot."


@pytest.fixture
def env(tmp_path: Path) -> Iterator[tuple[EngineService, AttachmentStore]]:
    model = write_tiny_model(tmp_path / "tiny.gguf", TinySpec(script=says("▁hello", "</s>")))
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    chats = ConversationStore(paths.database)
    svc = EngineService()
    listener = Loaded()
    svc.add_listener(listener)
    svc.load(LoadConfig(model, n_ctx=4096, threads=1))
    assert listener.gate.wait(WAIT_S)
    try:
        yield svc, AttachmentStore(paths, chats)
    finally:
        svc.close()
        chats.close()


def _ask(svc: EngineService, messages: list[ChatMessage], store: AttachmentStore | None) -> RecordingSink:
    sink = RecordingSink()
    req = GenerationRequest(SamplingParams(max_tokens=64), sink, messages=messages, attachment_store=store, batch_s=0)
    svc.submit(req)
    assert sink.done.wait(WAIT_S)
    return sink


def test_count_tokens_uses_the_models_tokenizer(env: tuple[EngineService, AttachmentStore]) -> None:
    svc, _ = env
    counted = svc.measure_tokens("naïve café 日本語")
    assert not counted.estimated
    # the tiny vocabulary has pieces for "▁café", "▁naïve", "日本", "語": far fewer tokens than bytes
    assert 3 <= counted.tokens < len("naïve café 日本語".encode())
    assert svc.count_tokens("") == 0


def test_count_tokens_without_a_model_is_an_estimate_and_says_so() -> None:
    svc = EngineService()
    try:
        counted = svc.measure_tokens("a" * 400)
        assert counted.estimated and counted.tokens == 100
    finally:
        svc.close()


def test_a_file_that_fits_is_read_whole(env: tuple[EngineService, AttachmentStore]) -> None:
    svc, atts = env
    note = atts.save(read_attachment_bytes("note.txt", FACT.encode()))
    sink = _ask(svc, [ChatMessage("user", "where is the key?", attachments=(atts.ref(note),))], atts)
    assert sink.failures == [] and sink.reason == "stop"
    (event,) = sink.planned
    (item,) = event.plan.items
    assert item.mode == WHOLE and not event.estimated
    block_tokens = svc.count_tokens(event.plan.prompt_text)
    assert item.tokens == block_tokens
    assert sink.final is not None and sink.final.prompt_tokens > block_tokens


def test_a_file_too_long_is_retrieved_within_the_context(env: tuple[EngineService, AttachmentStore]) -> None:
    svc, atts = env
    filler = "Quarterly figures were discussed at length by the board without any decision."
    paragraphs = [f"Section {i}. " + " ".join([filler] * 3) for i in range(60)]
    paragraphs.insert(23, FACT)
    doc = atts.save(read_attachment_bytes("house.md", "\n\n".join(paragraphs).encode()))
    assert svc.count_tokens(atts.text(doc)) > 4096  # far more than the context holds
    history = [ChatMessage("user", "hello"), ChatMessage("assistant", "hi")]
    ask = ChatMessage("user", "Where is the spare key hidden?", attachments=(atts.ref(doc),))
    sink = _ask(svc, [*history, ask], atts)
    assert sink.failures == [] and sink.trimmed_messages == [] and sink.reason == "stop"
    (event,) = sink.planned
    (item,) = event.plan.items
    assert item.mode == RETRIEVAL and 0 < item.used < item.total and item.tokens <= event.budget_tokens
    assert any(FACT in source.text for source in event.plan.sources)
    metrics = sink.final
    assert metrics is not None and metrics.prompt_tokens + 64 <= 4096


def test_attachments_without_a_store_fail_clearly(env: tuple[EngineService, AttachmentStore]) -> None:
    svc, atts = env
    note = atts.save(read_attachment_bytes("note.txt", b"words"))
    sink = _ask(svc, [ChatMessage("user", "hm", attachments=(atts.ref(note),))], None)
    assert sink.reason == "error"
    assert sink.failure_messages == ["This request has attachments but no attachment store to read them from."]


def test_counts_from_many_threads_at_once_all_use_the_tokenizer(env: tuple[EngineService, AttachmentStore]) -> None:
    svc, _ = env
    text = "naïve café hello world. " * 4000
    expected = svc.count_tokens(text)
    start = threading.Barrier(6)
    results: list[tuple[int, bool]] = []

    def count() -> None:
        start.wait()
        for _ in range(3):
            counted = svc.measure_tokens(text)
            results.append((counted.tokens, counted.estimated))

    threads = [threading.Thread(target=count) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [(expected, False)] * 18  # chips counted together are never mere estimates
