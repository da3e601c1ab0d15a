"""What the engine thread tells one API request (events on a queue its HTTP handler thread reads),
how that thread notices its client has gone, and the refusal of a conversation that does not fit
the context."""

from __future__ import annotations

import functools
import queue
import select
import socket
import threading
from collections.abc import Callable
from typing import Any

from ember_chat.engine.core.logprobs import TokenLogprob
from ember_chat.engine.core.tools import InvalidCall, ToolCall
from ember_chat.engine.inference.events import AttachmentsPlanned, KnowledgeUsed
from ember_chat.engine.inference.metrics import GenerationMetrics
from ember_chat.engine.inference.service.engine import GenerationSink
from ember_chat.engine.openai.api_error import TRIM_HINT, ApiError
from ember_chat.engine.openai.responses import ResponseBuilder
from ember_chat.engine.projects.turn import answered_json


class ClientGone(Exception):
    pass


def client_gone(sock: socket.socket) -> bool:
    """True when the client closed its end of `sock` (readable with no data)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


Observer = Callable[[GenerationMetrics, list[float]], None]  # a generation's metrics and inter-token gaps (ms)


class QueueSink(GenerationSink):
    """Engine-thread callbacks → a queue the HTTP handler thread reads.

    `trim_history`: whether the client opted into the window's behaviour (the oldest messages left
    out when the conversation does not fit). Without it the request is stopped at once, before its
    prompt is evaluated (`cancel`: the request's event), and answered 400 `context_length_exceeded`.
    `observe`: told of the generation's metrics when it finishes with some (the server's /metrics)."""

    def __init__(
        self, out: ResponseBuilder, trim_history: bool = False, observe: Observer | None = None, question: str = ""
    ) -> None:
        self.events: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self.observe = observe
        self.out = out
        self.question = question  # the last user message's text (whose words an answer's `quoted` leaves out)
        self.trim_history = trim_history
        self.cancel: threading.Event | None = None

    def attachments_planned(self, event: AttachmentsPlanned) -> None:
        self.out.attachments = event.plan.report()  # read by the handler after the events that follow

    def knowledge_used(self, event: KnowledgeUsed) -> None:
        # (read by the handler after the events that follow, with each answer's text)
        self.out.knowledge = functools.partial(answered_json, event, question=self.question)

    def trimmed(self, dropped_messages: int) -> None:
        if self.trim_history:
            return  # `ember.dropped_messages` in the answer says so
        if self.cancel is not None:
            self.cancel.set()  # on the engine thread: stopped before its prompt is evaluated
        self.events.put(("trimmed", dropped_messages))

    def token_logprob(self, entry: TokenLogprob) -> None:
        self.events.put(("logprob", entry))

    def started(self, snapshot: dict[str, Any]) -> None:
        self.events.put(("started", snapshot))

    def tokens(self, text: str, output_tokens: int) -> None:
        self.events.put(("tokens", text))

    def tool_call(self, index: int, call: ToolCall | InvalidCall) -> None:
        self.events.put(("tool_call", call))

    def failed(self, message: str, kind: str = "") -> None:
        self.events.put(("failed", (message, kind)))

    def finished(self, reason: str, text: str, metrics: GenerationMetrics | None, itl_ms: list[float]) -> None:
        if metrics is not None and self.observe is not None:
            self.observe(metrics, itl_ms)  # before the handler can answer: a scrape after the answer counts it
        self.events.put(("finished", (reason, text, metrics)))


def too_long(dropped_messages: int, n_ctx: int | None) -> ApiError:
    """The 400 for a conversation that fits the context only without its oldest messages."""
    context = f"the model's context ({n_ctx:,} tokens, with room kept for the answer)" if n_ctx else "the context"
    message = (
        f"The conversation is longer than {context}: it would fit only without its {dropped_messages} oldest "
        f"message(s).{TRIM_HINT}"
    )
    return ApiError(400, message, param="messages", code="context_length_exceeded")
