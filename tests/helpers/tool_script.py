"""A scripted model that calls tools (for the window's tool loop before a real model can): each chat
request takes the next turn of its script, streams the turn's text word by word and then gives its
calls the way the runtime does (ToolCallParsed per call, then Finished with reason tool_calls); a
turn without calls ends the answer. It records what each request was given (messages and tools)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.tools import InvalidCall, ToolCall, ToolRequest, ToolResult, ToolSpec
from ember_chat.engine.inference.events import Event, Finished, Token, ToolCallParsed
from tests.helpers.scripted_backend import ScriptedBackend


@dataclass
class Turn:
    text: str
    calls: Sequence[ToolCall | InvalidCall] = field(default_factory=tuple)
    reason: str | None = None  # how it ends (None: tool_calls with calls, else stop)


class ToolScriptBackend(ScriptedBackend):
    model_name = "Scripted"
    n_ctx = 100_000

    def __init__(self, turns: Sequence[Turn], then: str = "That is all.") -> None:
        """`then`: the answer to any request after the script is used up."""
        super().__init__()
        self.turns = list(turns)
        self.then = then

    def answer(self, messages: list[ChatMessage], params: SamplingParams, tools: ToolRequest | None) -> Iterator[Event]:
        turn = self.turns.pop(0) if self.turns else Turn(self.then)
        return self._run(turn)

    def complete(self, prompt: str, params: SamplingParams) -> Iterator[Event]:
        return self._run(Turn(self.then))

    def _run(self, turn: Turn) -> Iterator[Event]:
        rec, ready = self.begin()
        yield ready
        words = turn.text.split(" ") if turn.text else []
        for i, word in enumerate(words):
            if self._stop.is_set():
                yield Finished("cancelled", " ".join(words[:i]), rec.finish("cancelled"))
                return
            yield Token(word if i == 0 else " " + word, i, rec.token())
        for i, call in enumerate(turn.calls):
            yield ToolCallParsed(i, call)
        reason = turn.reason or ("tool_calls" if turn.calls else "stop")
        yield Finished(reason, turn.text, rec.finish(reason), tool_calls=tuple(turn.calls))


class WaitingTools:
    """A ToolProvider (source "Waiting") whose one tool, `wait`, runs until its call is cancelled (or
    `release` is set): a tool that takes a long time. `started` is set when a call begins."""

    source = "Waiting"

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.cancelled = threading.Event()

    def list_tools(self, timeout_s: float | None = None) -> list[ToolSpec]:
        return [ToolSpec("wait", "Wait until the work is done.", {"type": "object", "properties": {}})]

    def call(self, call: ToolCall, timeout_s: float | None = None, cancel: threading.Event | None = None) -> ToolResult:
        self.started.set()
        while not self.release.is_set():
            if cancel is not None and cancel.wait(0.01):
                self.cancelled.set()
                return ToolResult(call.id, call.name, "The wait was cancelled.", is_error=True)
        return ToolResult(call.id, call.name, "The work is done.")
