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
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.core.tools import InvalidCall, ToolCall, ToolRequest, ToolResult, ToolSpec
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.inference.events import Event, Finished, PromptReady, Token, ToolCallParsed
from ember_chat.engine.inference.metrics import MetricsRecorder, RunContext


@dataclass
class Turn:
    text: str
    calls: Sequence[ToolCall | InvalidCall] = field(default_factory=tuple)
    reason: str | None = None  # how it ends (None: tool_calls with calls, else stop)


class ToolScriptBackend:
    n_ctx = 100_000

    def __init__(self, turns: Sequence[Turn], then: str = "That is all.") -> None:
        """`then`: the answer to any request after the script is used up."""
        self.turns = list(turns)
        self.then = then
        self.requests: list[list[ChatMessage]] = []
        self.tools: list[ToolRequest | None] = []
        self._stop = threading.Event()
        self._loaded = False

    @property
    def loaded(self) -> bool:
        return self._loaded

    @property
    def description(self) -> ModelDescription | None:
        if not self._loaded:
            return None
        return ModelDescription("Scripted", "CPU", self.n_ctx, quantization="F32", threads=1, gpu_layers=0)

    def load(self, ref: ModelRef, progress=None, cancel=None) -> ModelDescription:
        self._loaded = True
        assert self.description is not None
        return self.description

    def close(self) -> None:
        self._loaded = False

    def request_stop(self) -> None:
        self._stop.set()

    def chat(
        self,
        messages: list[ChatMessage],
        params: SamplingParams,
        template_override: str | None = None,
        tools: ToolRequest | None = None,
    ) -> Iterator[Event]:
        self.requests.append(list(messages))
        self.tools.append(tools)
        turn = self.turns.pop(0) if self.turns else Turn(self.then)
        return self._run(turn)

    def complete(self, prompt: str, params: SamplingParams) -> Iterator[Event]:
        return self._run(Turn(self.then))

    def _run(self, turn: Turn) -> Iterator[Event]:
        self._stop.clear()
        rec = MetricsRecorder(RunContext("Scripted", "F32", "CPU", 1, 0, self.n_ctx))
        rec.prefill_started(10, 0)
        yield PromptReady(10, 0, self.n_ctx, rec.t_start_ns, rec.t_prefill_start_ns or 0)
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
