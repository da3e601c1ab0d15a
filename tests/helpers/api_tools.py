"""The API tool tests' question, tool and fake engine that answers with tool calls."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.core.tools import InvalidCall, ToolCall, ToolRequest
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.inference.calls.formats import check_call
from ember_chat.engine.inference.events import Event, Finished, PromptReady, Token, ToolCallParsed
from ember_chat.engine.inference.metrics import MetricsRecorder, RunContext

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather now in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["C", "F"]}},
            "required": ["city"],
        },
    },
}


ASK: list[Any] = [{"role": "user", "content": "What is the weather in Paris and in Oslo?"}]
CALL_TOKENS = 5  # tokens a scripted call stands for (the model wrote them; usage counts them)


class ToolBackend:
    """Answers as the runtime does with tools. To a user message: `preamble` as text, then a call per
    entry of `plan` ((name, arguments) pairs, checked against the request's tools as the runtime's
    parser checks them), and Finished(reason "tool_calls"). To tool results (the messages end with
    `tool` messages): a text answer made of the results it was given. With no active tools: text."""

    def __init__(self) -> None:
        self.reset()
        self._loaded = False
        self._stop = threading.Event()

    def reset(self) -> None:
        self.plan: list[tuple[str, dict[str, Any]]] = [("get_weather", {"city": "Paris"})]
        self.preamble = ""
        self.requests: list[tuple[list[ChatMessage], ToolRequest | None]] = []

    @property
    def loaded(self) -> bool:
        return self._loaded

    @property
    def description(self) -> ModelDescription | None:
        if not self._loaded:
            return None
        return ModelDescription("Tools", "CPU", 4096, quantization="F32", threads=1, gpu_layers=0)

    def load(self, ref: ModelRef, progress: Any = None, cancel: Any = None) -> ModelDescription:
        self._loaded = True
        assert self.description is not None
        return self.description

    def close(self) -> None:
        self._loaded = False

    def request_stop(self) -> None:
        self._stop.set()

    def complete(self, prompt: str, params: SamplingParams) -> Iterator[Event]:
        raise AssertionError("not used")

    def chat(
        self,
        messages: list[ChatMessage],
        params: SamplingParams,
        template_override: str | None = None,
        tools: ToolRequest | None = None,
    ) -> Iterator[Event]:
        self.requests.append((list(messages), tools))
        return self._run(messages, tools)

    def _run(self, messages: list[ChatMessage], tools: ToolRequest | None) -> Iterator[Event]:
        self._stop.clear()
        rec = MetricsRecorder(RunContext("Tools", "F32", "CPU", 1, 0, 4096))
        rec.prefill_started(12, 0)
        yield PromptReady(12, 0, 4096, rec.t_start_ns, rec.t_prefill_start_ns or 0)
        if messages[-1].role == "tool":
            results = [m.content for m in messages if m.role == "tool"]
            words = ["Here ", "is ", "what ", "I ", "found: ", "; ".join(results)]
        else:
            words = [w + " " for w in self.preamble.split()]
        for i, word in enumerate(words):
            yield Token(word, i, rec.token())
        if messages[-1].role == "tool" or tools is None or not tools.active:
            yield Finished("stop", "".join(words), rec.finish("stop"))
            return
        calls: list[ToolCall | InvalidCall] = []
        for index, (name, arguments) in enumerate(self.plan):
            for _ in range(CALL_TOKENS):  # the call's tokens: counted, their text is not answer text
                yield Token("", len(words), rec.token())
            raw = "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"
            call = check_call(name, arguments, raw, tools.tools)
            calls.append(call)
            yield ToolCallParsed(index, call)
        yield Finished("tool_calls", "".join(words), rec.finish("tool_calls"), tool_calls=tuple(calls))


def weather(city: str, unit: str = "C") -> str:
    """The client's own tool (what an agent would run)."""
    return f"{city}: {len(city) * 3} °{unit}"
