"""The seam every inference backend implements (the local runtime today, a remote server later)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Protocol

from engine.inference.events import Event
from engine.inference.params import LoadConfig, SamplingParams
from engine.inference.prompting import ChatMessage
from engine.models.gguf_inspect import ModelInfo


class InferenceBackend(Protocol):
    @property
    def loaded(self) -> bool: ...

    @property
    def backend(self) -> str: ...

    @property
    def n_ctx(self) -> int: ...

    def load(
        self,
        config: LoadConfig,
        progress: Callable[[float], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> ModelInfo: ...

    def close(self) -> None: ...

    def request_stop(self) -> None: ...

    def chat(
        self, messages: list[ChatMessage], params: SamplingParams, template_override: str | None = None
    ) -> Iterator[Event]: ...

    def complete(self, prompt: str, params: SamplingParams) -> Iterator[Event]: ...
