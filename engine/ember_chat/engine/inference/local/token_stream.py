"""One generation's events from a token source: the per-token code every local path shares.

A `TokenSource` says where the tokens come from: llama-cpp-python's own single-sequence path (seq 0,
runtime_sources.Seq0Source) or a run of the batch decoder (runtime_sources.BatchSource). Everything
that turns tokens into events (text decoding, thinking markers, tool calls, stop strings, limits,
metrics) is here, once, for both.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.reasoning import MarkerNormalizer
from ember_chat.engine.core.states import StopReason
from ember_chat.engine.core.tools import InvalidCall, ToolCall
from ember_chat.engine.errors import GenerationError
from ember_chat.engine.inference.calls.preview import CallPreview, call_preview
from ember_chat.engine.inference.events import (
    Event,
    Finished,
    PrefillProgress,
    PromptReady,
    StepWanted,
    Token,
    ToolCallParsed,
    ToolCallWriting,
)
from ember_chat.engine.inference.grammar.json_check import answer_check
from ember_chat.engine.inference.local.stop_strings import StopStringScanner
from ember_chat.engine.inference.metrics import MetricsRecorder

if TYPE_CHECKING:
    from ember_chat.engine.core.logprobs import TokenLogprob
    from ember_chat.engine.inference.calls.turn import ToolTurn
    from ember_chat.engine.inference.llama.speculative import SpeculationCounts


class TokenSource(Protocol):
    """Where one generation's tokens come from. `reused`: prompt tokens whose KV cells were already
    there (`restored` of them brought back from a snapshot). `full`: the source ran out of KV cells."""

    reused: int
    restored: int
    full: bool

    def prefill(self) -> Iterator[PrefillProgress | StepWanted]:
        """Evaluate the prompt (all but what the first `generate` step evaluates itself)."""
        ...

    def generate(self, tokens: list[int], grammar: str | None) -> Iterator[int | StepWanted]:
        """Sampled tokens, endless until closed, for `tokens` (the prompt, and after a tool call's
        restart the answer kept so far), under `grammar` when given."""
        ...

    def logprob(self, token: int, top: int) -> TokenLogprob | None: ...

    def perf(self) -> tuple[float, int, float, int] | None:
        """llama.cpp's own counters for this generation, when they are this generation's alone."""
        ...

    def image_encode_ms(self) -> float | None: ...

    def speculation(self) -> SpeculationCounts | None:
        """Tokens drafted and accepted by speculative decoding; None when it did not run."""
        ...

    def speculation_off(self) -> str | None:
        """Why speculative decoding, asked for, did not run (speculative.OFF_*); None: it ran, or was not asked."""
        ...

    def end(self, generated: list[int]) -> None:
        """The generation is over (whatever happened): `generated` are the answer's tokens."""
        ...


@dataclass
class StreamSetup:
    """What the per-token code needs besides the source."""

    tokens: list[int]
    params: SamplingParams
    rec: MetricsRecorder
    seed: int
    n_ctx: int
    piece: Callable[[int], bytes]
    is_eog: Callable[[int], bool]
    stopped: Callable[[], bool]
    grammar: str | None = None
    markers: MarkerNormalizer | None = None
    turn: ToolTurn | None = None
    # (reason, the answer's raw text, the prompt's and the answer's tokens that are the prompt's text and
    # that text exactly): called before Finished when the run ended cleanly
    remember: Callable[[str, str, list[int]], None] | None = None
    # the prompt ends with these first bytes of a character (an answer continued where it stopped
    # inside one): the answer's first bytes complete it
    held: bytes = b""


def stream_events(source: TokenSource, s: StreamSetup) -> Iterator[Event]:
    """PromptReady, PrefillProgress*, (Token | ToolCallParsed)*, Finished — with StepWanted wherever
    a batched source waits for the decoder's next step."""
    rec, params, tokens, markers, turn = s.rec, s.params, s.tokens, s.markers, s.turn
    rec.prefill_started(len(tokens), source.reused, restored=source.restored)
    assert rec.t_prefill_start_ns is not None
    yield PromptReady(len(tokens), source.reused, s.n_ctx, rec.t_start_ns, rec.t_prefill_start_ns, source.restored)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    decoder.decode(s.held)  # (gives nothing: an incomplete character, completed by the first token)
    stops = StopStringScanner(params.stop)
    generated: list[int] = []
    raw_text: list[str] = []
    shown: list[str] = []
    reason = StopReason.LENGTH
    try:
        try:
            yield from source.prefill()
        except RuntimeError as exc:
            if not s.stopped():
                raise GenerationError(f"llama.cpp failed while evaluating the prompt: {exc}") from exc
        if s.stopped():  # stopped during the prompt: no answer
            yield Finished(StopReason.CANCELLED, "", rec.finish(StopReason.CANCELLED, seed=s.seed))
            return
        calls: list[ToolCall | InvalidCall] = []
        writing: CallPreview | None = None  # the call being written, as last given
        gen = source.generate(tokens, s.grammar)
        try:
            while True:
                restart = None
                for token in gen:
                    if type(token) is StepWanted:
                        yield token
                        continue
                    assert isinstance(token, int)
                    t_ns = time.perf_counter_ns()
                    if not params.ignore_eos and s.is_eog(token):
                        reason = StopReason.STOP
                        break
                    generated.append(token)
                    logprob = None
                    if params.logprobs is not None:  # before the next evaluation replaces these logits
                        logprob = source.logprob(token, params.logprobs)
                    piece = decoder.decode(s.piece(token))
                    raw_text.append(piece)
                    thinking = markers is not None and markers.thinking
                    if turn is not None:  # (it normalizes the markers itself: it may take tokens back)
                        piece, found, restart = turn.feed(piece)
                        for call in found:
                            calls.append(call)
                            yield ToolCallParsed(len(calls) - 1, call)
                        text = turn.writing
                        preview = call_preview(text) if text is not None and restart is None else None
                        if preview is not None and preview != writing:
                            writing = preview
                            yield ToolCallWriting(len(calls), preview.name, preview.arguments)
                    elif markers is not None:
                        piece = markers.feed(piece)
                    thinking = thinking or (markers is not None and markers.thinking)  # (a closing marker too)
                    rec.token(t_ns, thinking=thinking)  # an end-of-generation token is not part of the answer
                    visible, hit = stops.feed(piece)
                    shown.append(visible)
                    yield Token(visible, len(generated) - 1, t_ns, thinking=thinking, logprob=logprob)
                    if restart is not None:
                        break
                    if hit:
                        reason = StopReason.STOP_STRING
                        break
                    if s.stopped():
                        reason = StopReason.CANCELLED
                        break
                    if len(generated) >= params.max_tokens:
                        reason = StopReason.LENGTH
                        break
                    if len(tokens) + len(generated) >= s.n_ctx:
                        reason = StopReason.CONTEXT_FULL
                        break
                else:
                    if source.full:  # (the source ended: no KV cells left for this sequence)
                        reason = StopReason.CONTEXT_FULL
                    elif s.stopped():
                        reason = StopReason.CANCELLED
                if restart is None:
                    break
                # a call opened: take back the tokens from the one it starts in, generate them under its grammar
                gen.close()
                rec.take_back(len(generated) - restart.keep)
                del generated[restart.keep :], raw_text[restart.keep :]
                decoder.reset()
                if not generated:
                    decoder.decode(s.held)
                gen = source.generate(tokens + generated, restart.grammar)
        except RuntimeError as exc:
            if not s.stopped():
                raise GenerationError(f"llama.cpp failed while generating: {exc}") from exc
            reason = StopReason.CANCELLED
        finally:
            gen.close()
    finally:
        source.end(generated)
    # An answer that stops inside a character (max tokens, Stop) keeps its first bytes back: not
    # shown nor saved as U+FFFD, but in the metrics (held_utf8), so that a Continue completes it.
    held = decoder.getstate()[0]
    tail = ""
    raw_text.append(tail)
    if turn is not None:
        tail, found = turn.flush(tail)
        for call in found:
            calls.append(call)
            yield ToolCallParsed(len(calls) - 1, call)
        reason = turn.end_reason(reason)
    elif markers is not None:
        tail = markers.feed(tail) + markers.flush()
    if reason != StopReason.STOP_STRING:
        tail = stops.flush(tail)
        if tail:
            shown.append(tail)
            # text held back at the end (a partial stop string): no new token
            yield Token(tail, max(0, len(generated) - 1), rec.token_times_ns[-1] if generated else 0, count=0)
    spec = source.speculation()
    metrics = rec.finish(
        reason,
        source.perf(),
        seed=s.seed,
        image_encode_ms=source.image_encode_ms(),
        speculative_drafted=spec.drafted if spec is not None else None,
        speculative_accepted=spec.accepted if spec is not None else None,
        speculative_mode=spec.mode if spec is not None else None,
        speculative_speedup=_rounded(spec.speedup()) if spec is not None else None,
        speculative_stopped=spec.stopped if spec is not None else None,
        speculative_off=source.speculation_off(),
    )
    metrics = replace(
        metrics, json_check=answer_check(params.response_format, "".join(shown)), held_utf8=held.hex() or None
    )
    if s.remember is not None:
        # the text remembered for prefix reuse lacks the held bytes: so do its tokens (a Continue puts
        # them back after it); a token with part of a whole character too cannot be split: not kept
        kept = _without_held(tokens + generated, len(held), s.piece)
        if kept is not None:
            s.remember(reason, "".join(raw_text), kept)
    yield Finished(reason, "".join(shown), metrics, tool_calls=tuple(calls))


def _without_held(tokens: list[int], held: int, piece: Callable[[int], bytes]) -> list[int] | None:
    """`tokens` without the last ones that are their `held` last bytes exactly, or None when a token
    holds some of them and some bytes of whole characters."""
    end, size = len(tokens), 0
    while size < held and end > 0:
        end -= 1
        size += len(piece(tokens[end]))
    return tokens[:end] if size == held else None


def _rounded(value: float | None) -> float | None:
    return round(value, 2) if value is not None else None
