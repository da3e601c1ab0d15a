"""The seam every inference backend implements (the local llama.cpp runtime and a remote
OpenAI-compatible server) and the neutral description they return; the model references they load
are in engine/core/refs.py."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.core.tools import ToolRequest
from ember_chat.engine.inference.events import Event
from ember_chat.engine.inference.wording import ENGLISH, Wording


@dataclass(frozen=True)
class ModelDescription:
    """What any backend says about the model it loaded; local-only facts are optional."""

    name: str
    backend: str  # CPU, CUDA, Metal, … or "remote"
    n_ctx: int | None
    source: str = "local"  # "local", or the remote connection's name
    architecture: str | None = None
    quantization: str | None = None
    parameter_count: int | None = None
    has_chat_template: bool = True
    threads: int | None = None
    gpu_layers: int | None = None
    path: Path | None = None
    thinking_switch: bool = False  # its chat template can turn thinking on and off
    kv_cache_type: str = "f16"
    vision: bool = False  # it accepts images (a local model loaded with its projector)
    kind: str = "chat"  # or "embedding", "reranker": no chat (gguf_inspect.model_kind)
    draft_model: str | None = None  # the draft model's file name (speculative decoding), loaded with it
    draft_refused: str | None = None  # why the draft model asked for was not loaded (the model runs without)

    @property
    def is_remote(self) -> bool:
        return self.source != "local"

    def badge(self, words: Wording = ENGLISH) -> str:
        """The backend badge: where the model runs and how."""
        if self.is_remote:
            return words.remote_badge.format(connection=self.source)
        badge = words.local_badge_one_thread if self.threads == 1 else words.local_badge
        parts = [badge.format(backend=self.backend, threads=self.threads, layers=self.gpu_layers)]
        if self.n_ctx:
            parts.append(words.context.format(n=f"{self.n_ctx:,}"))
        if self.kv_cache_type != "f16":
            parts.append(words.kv_cache.format(type=self.kv_cache_type))
        return " · ".join(parts)

    def status(self, words: Wording = ENGLISH) -> str:
        parts = [self.quantization] if self.quantization else []
        if self.parameter_count:
            parts.append(words.parameters.format(millions=f"{self.parameter_count / 1e6:,.0f}"))
        if self.is_remote:
            parts.append(words.context.format(n=f"{self.n_ctx:,}") if self.n_ctx else words.remote)
        return " · ".join(parts)


class InferenceBackend(Protocol):
    @property
    def loaded(self) -> bool: ...

    @property
    def description(self) -> ModelDescription | None: ...

    def load(
        self,
        ref: ModelRef,
        progress: Callable[[float], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> ModelDescription: ...

    def close(self) -> None: ...

    def request_stop(self) -> None: ...

    def chat(
        self,
        messages: list[ChatMessage],
        params: SamplingParams,
        template_override: str | None = None,
        tools: ToolRequest | None = None,
    ) -> Iterator[Event]:
        """The assistant's next turn. With `tools` (active), the model may answer with calls: they come as
        ToolCallParsed events and in Finished.tool_calls (reason tool_calls), never as answer text. The
        messages may end with `tool` messages (the results of the calls of the assistant turn before)."""
        ...

    def complete(self, prompt: str, params: SamplingParams) -> Iterator[Event]: ...
