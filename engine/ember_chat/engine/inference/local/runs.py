"""How the local runtime starts a generation's token source (llama-cpp-python's own path on seq 0, or a
run of the batch decoder) and stops it: the abort flag wired to llama.cpp's abort callback, and the
count of `request_stop()` calls a batched run compares with the one it started at."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import llama_cpp

from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.inference.llama.logit_bias import check_logit_bias
from ember_chat.engine.inference.local.cache import ContextCache
from ember_chat.engine.inference.local.sources import BatchSource, Seq0Source
from ember_chat.engine.inference.local.token_stream import TokenSource

if TYPE_CHECKING:  # vision.py loads libmtmd: imported once a model has a projector
    from ember_chat.engine.inference.llama.draft_model import DraftModel
    from ember_chat.engine.inference.llama.vision import VisionContext, VisionPrompt


class RunStarter:
    def __init__(self, cache: ContextCache) -> None:
        self._cache = cache
        self._abort = threading.Event()
        abort = self._abort  # the callback must not hold the runtime (no reference cycle)
        # Kept alive as long as the runtime: llama.cpp holds a raw pointer to it.
        self._abort_callback = llama_cpp.ggml_abort_callback(lambda _data: abort.is_set())
        self._stops = 0  # request_stop() calls so far
        self.draft: DraftModel | None = None  # the draft model loaded with the model (the runtime sets it)

    def request_stop(self) -> None:
        """Stop the running generation (thread-safe)."""
        self._stops += 1  # (a batched run stops when this changed since it started)
        self._abort.set()

    @property
    def stops(self) -> int:
        """How many times `request_stop()` was called (a run compares it with the count it began at)."""
        return self._stops

    def seq0_run(
        self,
        llm: llama_cpp.Llama,
        tokens: list[int],
        params: SamplingParams,
        seed: int,
        context: VisionContext | None,
        vision: VisionPrompt | None,
        conversation: bool,
        cancel: threading.Event | None,
        piece: Callable[[int], bytes],
        client: str = "",
    ) -> tuple[TokenSource, Callable[[], bool]]:
        """llama-cpp-python's own path on seq 0 (its KV state restored from a snapshot when that shares
        more of the prompt than seq 0 holds). `context`: the model's projector, `vision`: the prompt's
        images. `client`: who asked (the engine service's GenerationRequest.client): the run drafts from
        that client's recent answers alone (answer_ngrams.py)."""
        check_logit_bias(params.logit_bias, llm.n_vocab())  # (before the prompt is evaluated, not after)
        reused, restored = self._cache.seq0_start(llm, tokens, conversation and vision is None)
        if vision is not None:
            reused = vision.align(reused)
        self._abort.clear()
        llm.set_seed(seed)
        abort = self._abort
        stopped = abort.is_set if cancel is None else (lambda: abort.is_set() or cancel.is_set())
        images = (context, vision) if vision is not None and context is not None else None
        source = Seq0Source(
            llm,
            tokens,
            params,
            reused,
            stopped,
            self._abort_callback,
            piece,
            images,
            restored,
            self.draft,
            self._cache.answers_of(client),
        )
        return source, stopped

    def batch_run(
        self, tokens: list[int], params: SamplingParams, seed: int, cancel: threading.Event | None, client: str = ""
    ) -> tuple[TokenSource, Callable[[], bool]]:
        """A run of the batch decoder. `request_stop()` stops it only when called after it started.
        `client` as for `seq0_run`."""
        stops = self._stops

        def stopped() -> bool:
            return self._stops != stops or (cancel is not None and cancel.is_set())

        decoder = self._cache.batch_decoder()
        decoder.draft = self.draft  # (a lone run drafts with it: "draft", and "auto" while one is loaded)
        answers = self._cache.answers_of(client)
        return BatchSource(decoder, decoder.start(tokens, params, seed, answers), stopped), stopped
