"""The one recording GenerationSink of the tests: what a request sent its sink, kept for the test to
assert on, and events to wait on (its first token, its end). The engine calls it on its own thread;
a test reads it after waiting on `done` (or `first_token`, `started_event`)."""

from __future__ import annotations

import threading
from typing import Any

from ember_chat.engine.inference.events import AttachmentsPlanned, KnowledgeUsed
from ember_chat.engine.inference.metrics import GenerationMetrics
from ember_chat.engine.inference.service.engine import GenerationSink


class RecordingSink(GenerationSink):
    """Records the answer's text batches, the metrics snapshots, failures (message, kind), how the
    attachments were planned, the knowledge used, trimmed messages, and how it ended (`reason`, the whole
    answer's text in `finished_text`, `final` metrics). A test that needs more subclasses it and calls
    super()."""

    def __init__(self) -> None:
        self.text: list[str] = []  # each batch of answer text, in order ("".join: the answer)
        self.snapshots: list[dict[str, Any]] = []
        self.failures: list[tuple[str, str]] = []
        self.planned: list[AttachmentsPlanned] = []
        self.knowledge: list[KnowledgeUsed] = []
        self.trimmed_messages: list[int] = []
        self.reason: str | None = None
        self.finished_text = ""
        self.final: GenerationMetrics | None = None
        self.started_event = threading.Event()  # (`started` is the sink's method)
        self.first_token = threading.Event()
        self.done = threading.Event()

    @property
    def failure_messages(self) -> list[str]:
        return [message for message, _kind in self.failures]

    def started(self, snapshot: dict[str, Any]) -> None:
        self.started_event.set()

    def tokens(self, text: str, output_tokens: int) -> None:
        self.text.append(text)
        self.first_token.set()

    def metrics(self, snapshot: dict[str, Any]) -> None:
        self.snapshots.append(snapshot)

    def trimmed(self, dropped_messages: int) -> None:
        self.trimmed_messages.append(dropped_messages)

    def attachments_planned(self, event: AttachmentsPlanned) -> None:
        self.planned.append(event)

    def knowledge_used(self, event: KnowledgeUsed) -> None:
        self.knowledge.append(event)

    def failed(self, message: str, kind: str = "") -> None:
        self.failures.append((message, kind))

    def finished(self, reason: str, text: str, metrics: GenerationMetrics | None, itl_ms: list[float]) -> None:
        self.reason, self.finished_text, self.final = reason, text, metrics
        self.done.set()
