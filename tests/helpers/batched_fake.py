"""A backend that decodes runs together the way the local runtime's batched path does, but
deterministically (tests of the engine service's continuous batching): each run yields StepWanted
before each of its tokens, and `step()` records which runs it decoded. A run that cannot be batched
(logprobs, tools) runs alone and notes how many batched runs were alive then."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.core.tools import ToolRequest
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.inference.events import Event, Finished, StepWanted, Token
from tests.helpers.scripted_backend import ScriptedBackend


class BatchedFake(ScriptedBackend):
    """Runs named by their last message; `log` says when each started and ended, `steps` which runs
    each step decoded. `on_step(n)` is called inside the n-th step (1-based), on the engine thread."""

    model_name = "Batched"
    quantization = None

    def __init__(self, slots: int = 4) -> None:
        super().__init__()
        self.slots = slots
        self.steps: list[tuple[str, ...]] = []
        self.log: list[tuple[Any, ...]] = []
        self.stops = 0
        self.snapshots: object | None = None
        self.on_step: Callable[[int], None] | None = None
        self.fail_step = 0  # this step raises
        self._waiting: list[str] = []
        self._active: set[str] = set()

    @property
    def batch_slots(self) -> int:
        if not self._loaded:
            return 0
        return self.slots + 1 if self.slots > 1 else 1  # (as the runtime: `parallel`, and one kept for the window)

    def load(
        self,
        ref: ModelRef,
        progress: Callable[[float], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> ModelDescription:
        self.log.append(("load", len(self._active)))
        return super().load(ref, progress, cancel)

    def request_stop(self) -> None:
        self.stops += 1

    def can_batch(self, params: SamplingParams, tools: ToolRequest | None, messages: list[ChatMessage] | None) -> bool:
        return tools is None and params.logprobs is None

    def chat(
        self,
        messages: list[ChatMessage],
        params: SamplingParams,
        template_override: str | None = None,
        tools: ToolRequest | None = None,
        *,
        batched: bool = False,
        cancel: threading.Event | None = None,
    ) -> Iterator[Event]:
        name = messages[-1].content
        if batched:
            assert cancel is not None
            return self._batched(name, params, cancel)
        return self._alone(name, params)

    def step(self) -> None:
        self.steps.append(tuple(self._waiting))
        self._waiting = []
        if self.fail_step == len(self.steps):
            raise RuntimeError("llama_decode failed")
        if self.on_step is not None:
            self.on_step(len(self.steps))

    def _batched(self, name: str, params: SamplingParams, cancel: threading.Event) -> Iterator[Event]:
        self._active.add(name)
        self.log.append(("start", name))
        rec, ready = self.begin()
        try:
            yield ready
            parts: list[str] = []
            reason = "length"
            for i in range(params.max_tokens):
                if cancel.is_set():
                    reason = "cancelled"
                    break
                self._waiting.append(name)
                yield StepWanted()
                if name not in self.steps[-1]:
                    raise AssertionError(f"{name} was resumed without a step")
                if name.startswith("boom") and i == 1:
                    raise RuntimeError("the model broke")
                parts.append(f"{name}{i} ")
                yield Token(parts[-1], i, rec.token())
            yield Finished(reason, "".join(parts), rec.finish(reason))
        finally:
            self._active.discard(name)
            self.log.append(("end", name))

    def _alone(self, name: str, params: SamplingParams) -> Iterator[Event]:
        self.log.append(("alone", name, len(self._active)))
        rec, ready = self.begin()
        yield ready
        parts = [f"{name}{i} " for i in range(params.max_tokens)]
        for i, part in enumerate(parts):
            yield Token(part, i, rec.token())
        self.log.append(("alone-end", name))
        yield Finished("length", "".join(parts), rec.finish("length"))
