"""The engine's InferenceBackend protocol (engine/inference/backend.py) written once for the tests' fake
models: FakeBackend, ToolScriptBackend, BatchedFake and api_tools' ToolBackend subclass it and
say only how they answer. tests/engine/test_scripted_backend.py checks it keeps the protocol's
signatures, so a change to the protocol shows here instead of in a fake that silently drifted."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.core.tools import ToolRequest
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.inference.events import Event, Finished, PromptReady, Token
from ember_chat.engine.inference.metrics import MetricsRecorder, RunContext


class ScriptedBackend:
    """A model that loads at once (on the CPU, one thread) and records what each chat request was given
    (`requests`, `params`, `tools`, in order). A subclass writes `answer` (and `complete` for a raw
    prompt), starting each run with `begin`, and honours `_stop` (set by `request_stop`)."""

    model_name = "Fake"
    n_ctx = 4096
    quantization: str | None = "F32"

    def __init__(self) -> None:
        self.requests: list[list[ChatMessage]] = []
        self.params: list[SamplingParams] = []
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
        return ModelDescription(
            self.model_name, "CPU", self.n_ctx, quantization=self.quantization, threads=1, gpu_layers=0
        )

    def load(
        self,
        ref: ModelRef,
        progress: Callable[[float], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> ModelDescription:
        self._loaded = True
        if progress:
            progress(1.0)
        description = self.description
        assert description is not None
        return description

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
        self.params.append(params)
        self.tools.append(tools)
        return self.answer(messages, params, tools)

    def complete(self, prompt: str, params: SamplingParams) -> Iterator[Event]:
        raise NotImplementedError(f"{type(self).__name__} answers chat requests only")

    def answer(self, messages: list[ChatMessage], params: SamplingParams, tools: ToolRequest | None) -> Iterator[Event]:
        """The events of one chat request's answer (a generator: it runs as the engine reads it)."""
        raise NotImplementedError(f"{type(self).__name__} says how it answers")

    def begin(self, prompt_tokens: int = 10) -> tuple[MetricsRecorder, PromptReady]:
        """A run's start, called as its generator starts (as the runtime's: a stop asked for before is
        forgotten): its metrics recorder, and the PromptReady event to yield first."""
        self._stop.clear()
        rec = MetricsRecorder(RunContext(self.model_name, self.quantization, "CPU", 1, 0, self.n_ctx))
        rec.prefill_started(prompt_tokens, 0)
        return rec, PromptReady(prompt_tokens, 0, self.n_ctx, rec.t_start_ns, rec.t_prefill_start_ns or 0)


class FailsMidway(ScriptedBackend):
    """Says a word, then fails (a stream that fails after its 200)."""

    def answer(self, messages: list[ChatMessage], params: SamplingParams, tools: ToolRequest | None) -> Iterator[Event]:
        rec, ready = self.begin()
        yield ready
        yield Token("Hello", 0, rec.token())
        yield Finished("error", "Hello", rec.finish("error"), error="the model broke")
