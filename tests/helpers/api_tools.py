"""The API tool tests' question, tool and fake engine that answers with tool calls."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.core.tools import InvalidCall, ToolCall, ToolRequest
from ember_chat.engine.inference.calls.formats import check_call
from ember_chat.engine.inference.events import Event, Finished, Token, ToolCallParsed
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.server import ApiServer
from tests.helpers.scripted_backend import ScriptedBackend

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


class ToolBackend(ScriptedBackend):
    """Answers as the runtime does with tools. To a user message: `preamble` as text, then a call per
    entry of `plan` ((name, arguments) pairs, checked against the request's tools as the runtime's
    parser checks them), and Finished(reason "tool_calls"). To tool results (the messages end with
    `tool` messages): a text answer made of the results it was given. With no active tools: text.
    Request i was given `requests[i]` (its messages) and `tools[i]`; `reset` forgets them."""

    model_name = "Tools"

    def __init__(self) -> None:
        super().__init__()
        self.reset()

    def reset(self) -> None:
        self.plan: list[tuple[str, dict[str, Any]]] = [("get_weather", {"city": "Paris"})]
        self.preamble = ""
        self.requests.clear()
        self.params.clear()
        self.tools.clear()

    def answer(self, messages: list[ChatMessage], params: SamplingParams, tools: ToolRequest | None) -> Iterator[Event]:
        return self._run(messages, tools)

    def _run(self, messages: list[ChatMessage], tools: ToolRequest | None) -> Iterator[Event]:
        rec, ready = self.begin(prompt_tokens=12)
        yield ready
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


@contextlib.contextmanager
def tool_server() -> Iterator[tuple[ToolBackend, ApiServer]]:
    """Ember's API server on 127.0.0.1 over a ToolBackend (loaded as "tools"), stopped at the end."""
    backend = ToolBackend()
    service = EngineService(backend_factory=lambda ref: backend)
    server = ApiServer(service, ServerConfig(port=0))
    try:
        load_blocking(service, LoadConfig(Path("tools.gguf")), "tools")
        server.start()
        yield backend, server
    finally:
        server.stop()
        service.close()
