"""A fake inference backend that streams scripted tokens as fast as it can (GUI stress tests and the
GUI benchmark). It speaks the same event protocol as the local runtime."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.reasoning import MarkerNormalizer
from ember_chat.engine.core.tools import ToolRequest
from ember_chat.engine.inference.events import Event, Finished, Token
from tests.helpers.scripted_backend import ScriptedBackend

WORDS = ["Ember ", "streams ", "tokens ", "quickly, ", "**bold** ", "and ", "`code` ", "naïve ", "café ", "😀 "]


class FakeBackend(ScriptedBackend):
    n_ctx = 1_000_000

    def __init__(
        self, n_tokens: int = 20_000, delay_s: float = 0.0, rate: float = 0.0, script: list[str] | None = None
    ) -> None:
        """`delay_s`: a pause before every token (a slow model); `rate`: tokens per second to pace
        a fast stream at (0: as fast as Python can yield); `script`: these pieces instead of words
        (a reasoning model's markers are handled like the real runtime handles them)."""
        super().__init__()
        self.script = script
        self.n_tokens = len(script) if script else n_tokens
        self.delay_s = delay_s
        self.rate = rate
        self.on_token: Callable[[int], None] | None = None

    def answer(self, messages: list[ChatMessage], params: SamplingParams, tools: ToolRequest | None) -> Iterator[Event]:
        return self._run(params)

    def complete(self, prompt: str, params: SamplingParams) -> Iterator[Event]:
        return self._run(params)

    def _run(self, params: SamplingParams) -> Iterator[Event]:
        rec, ready = self.begin()
        yield ready
        parts = []
        markers = MarkerNormalizer()
        reason = "length"
        t0 = time.perf_counter()
        for i in range(min(self.n_tokens, params.max_tokens)):
            if self._stop.is_set():
                reason = "cancelled"
                break
            if self.delay_s:
                time.sleep(self.delay_s)
            if self.rate:
                ahead = t0 + i / self.rate - time.perf_counter()
                if ahead > 0.001:
                    time.sleep(ahead)
            if self.script:
                was = markers.thinking
                text = markers.feed(self.script[i])
                thinking = was or markers.thinking
            else:  # words, with a paragraph break every 80 tokens, like a real answer
                text = WORDS[i % len(WORDS)] + ("\n\n" if i % 80 == 79 else "")
                thinking = False
            parts.append(text)
            t = rec.token(thinking=thinking)
            yield Token(text, i, t, thinking=thinking)
            if self.on_token:
                self.on_token(i)
        if self.script and len(parts) == len(self.script) and reason == "length":
            reason = "stop"  # the script is the whole answer: the model ended its turn
        yield Finished(reason, "".join(parts), rec.finish(reason))
