"""What the benchmark lab measures: a local model through Ember's runtime, or a model served by a
remote OpenAI-compatible server through the remote backend. Both give a prompt of about n tokens,
measure one prompt + `output` generated tokens, and say what their figures mean.

Local: n pseudo-random token ids of the model's vocabulary, evaluated from an empty KV cache
(llama-bench's pp), then exactly `output` tokens, end-of-generation tokens included (tg).

Remote: the server tokenizes, so the prompt is text — pseudo-random common words, different for
every prompt length and repetition so that a server's prompt cache has nothing to reuse — sized with
the server's own tokenizer when it has one (llama.cpp's /tokenize, llama-cpp-python's
/extras/tokenize); the figures use the prompt tokens the server reports. It is sent to
/v1/completions with `ignore_eos` (honoured by llama.cpp's server, vLLM and Ember's own; other
servers may stop early, and the decode rate then uses the tokens actually generated). Times are
taken here, so TTFT and prefill speed include the network round trip; the server's own counters
(llama.cpp's `timings`) are kept beside them. Peak memory is the server's business and is not
measured.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, Protocol

from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.states import StopReason
from ember_chat.engine.core.stopping import stopping_on
from ember_chat.engine.errors import EmberError, GenerationError
from ember_chat.engine.inference.backend import InferenceBackend
from ember_chat.engine.inference.events import Event, Finished
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.inference.metrics import GenerationMetrics
from ember_chat.engine.inference.remote.backend import RemoteBackend

TOKEN_SEED = 1234

# Short, common words: one token each in most vocabularies.
_WORD_TEXT = """
the of and to in is was for on are with as at be this from have or by one had not but what all were
when we there can an your which their said if do will each about how up out them then she many some
so these would other into has more her two like him see time could no make than first been its who
now people my made over did down only way find use may water long little very after words called
just where most know get through back much before go good new write our used me man too any day same
right look think also around another came come work three word must because does part even place well
"""
_WORDS = _WORD_TEXT.split()


class BenchTarget(Protocol):
    name: str
    where: str  # "local", or the connection's name
    measures_memory: bool  # peak memory of this process means something (the model runs here)

    def prompt(self, n: int, seed: int) -> Any: ...

    def measure(self, prompt: Any, output: int, cancel: threading.Event) -> GenerationMetrics | None: ...

    def facts(self) -> dict[str, Any]: ...


def bench_tokens(runtime: LocalRuntime, n: int, seed: int = TOKEN_SEED) -> list[int]:
    """n pseudo-random token ids of the model's vocabulary (llama-bench's prompts are random too)."""
    rng = random.Random(seed)
    vocab = runtime.vocab_size()
    return [rng.randrange(min(vocab, 256) // 2, vocab) for _ in range(n)]


def _metrics_of(events: Iterator[Event], stop: Callable[[], None], cancel: threading.Event) -> GenerationMetrics | None:
    """The finished measurement's metrics; None when cancelled (whatever the stop made the request
    fail with). A measurement that did not complete (a stream cut or aborted by the server) is an
    error, never a sample."""
    with stopping_on(cancel, stop):
        try:
            for ev in events:
                if isinstance(ev, Finished):
                    if cancel.is_set():
                        return None
                    if ev.error or ev.reason in (StopReason.CANCELLED, StopReason.INTERRUPTED):
                        raise GenerationError(ev.error or "the server stopped the answer before it was complete.")
                    return ev.metrics
        except EmberError:
            if cancel.is_set():
                return None
            raise
    return None


class LocalTarget:
    measures_memory = True
    where = "local"

    def __init__(self, runtime: LocalRuntime) -> None:
        self.runtime = runtime
        desc = runtime.description
        assert desc is not None
        self.name = desc.name

    def prompt(self, n: int, seed: int) -> list[int]:
        return bench_tokens(self.runtime, n, seed)

    def measure(self, prompt: list[int], output: int, cancel: threading.Event) -> GenerationMetrics | None:
        self.runtime.reset_cache()
        params = SamplingParams(temperature=0.0, max_tokens=output, seed=0)
        return _metrics_of(self.runtime.run_tokens(prompt, params), self.runtime.request_stop, cancel)

    def facts(self) -> dict[str, Any]:
        d = self.runtime.description
        assert d is not None
        return {"backend": d.backend, "threads": d.threads, "gpu_layers": d.gpu_layers, "n_ctx": d.n_ctx}


def words_text(n_words: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(_WORDS) for _ in range(n_words))


class RemoteTarget:
    measures_memory = False

    def __init__(self, backend: RemoteBackend) -> None:
        self.backend = backend
        desc = backend.description
        assert desc is not None
        self.name = desc.name
        self.where = desc.source or "remote"

    def prompt(self, n: int, seed: int) -> tuple[str, int | None]:
        """About n tokens of text: n words, rescaled by the server's count of them when it can count
        (then that count, else None)."""
        words = n
        for _ in range(3):
            text = words_text(words, seed)
            counted = self.backend.count_tokens(text)
            if not counted or counted == n:
                return text, counted
            words = max(1, round(words * n / counted))
        text = words_text(words, seed)
        return text, self.backend.count_tokens(text)

    def measure(self, prompt: tuple[str, int | None], output: int, cancel: threading.Event) -> GenerationMetrics | None:
        text, counted = prompt
        params = SamplingParams(temperature=0.0, max_tokens=output, seed=0, ignore_eos=True)
        metrics = _metrics_of(self.backend.complete(text, params), self.backend.request_stop, cancel)
        if metrics is not None and not metrics.prompt_tokens and counted and metrics.ttft_s:
            # the server reports no usage (llama-cpp-python's stream): its tokenizer's count instead
            metrics = replace(metrics, prompt_tokens=counted, prefill_tokens_per_s=counted / metrics.ttft_s)
        return metrics

    def facts(self) -> dict[str, Any]:
        return {"backend": "remote", "server": self.where, "model_id": self.name}


def target_for(backend: InferenceBackend) -> BenchTarget:
    if isinstance(backend, LocalRuntime):
        return LocalTarget(backend)
    if isinstance(backend, RemoteBackend):
        return RemoteTarget(backend)
    raise TypeError(f"the benchmark lab cannot measure a {type(backend).__name__}")
