"""One answer's tool calls as the local runtime generates it: the calls are read from the text as it
streams (ToolCallStream), and held to their tools' schemas by a grammar (ToolGrammar).

The grammar is lazy, as llama.cpp's is for llama-server: the model writes freely (thinking, text) until
a call opens; then the runtime takes back the tokens from the one the call's opener starts in, and
generates again from there under the grammar of the call (the part of that token before the opener
is the grammar's `lead`, so it is written again, not lost). The token is found in the model's own text
(what it wrote, before thinking markers were put in canonical form and with what the normalizer still
holds back), so the context never holds a character twice. What the user was already shown is not
shown twice: the parser and the marker normalizer are put back as they were before that token, and the
text they give again is swallowed. With `tool_choice` required or a named tool, the grammar holds the
answer from its first token instead (closing the thinking first where the prompt opened it: a call is
never read inside thinking).

An answer that ends inside a call (max tokens, the context) after complete calls ends with them: the
unfinished one is dropped, and the answer's stop reason is "tool_calls" (`end_reason`): a parallel
call is never returned cut. Cut with no complete call before it, it comes as a CutShort.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from ember_chat.engine.core.reasoning import CLOSE, MarkerNormalizer
from ember_chat.engine.core.states import StopReason
from ember_chat.engine.core.tools import CutShort, InvalidCall, ToolCall, ToolRequest
from ember_chat.engine.inference.calls.formats import ToolFormat
from ember_chat.engine.inference.calls.grammar import ToolGrammar
from ember_chat.engine.inference.calls.parsing import ToolCallStream


@dataclass(frozen=True)
class Restart:
    """Generate again from `keep` tokens of the answer (those after are taken back), under `grammar`."""

    keep: int
    grammar: str


@dataclass(frozen=True)
class _Mark:
    """The state before one token of the answer was read."""

    stream: ToolCallStream
    markers: MarkerNormalizer
    start: int  # where the token's text starts, in all the canonical text read
    raw_start: int  # where it starts in the model's own text
    shown: int  # characters of answer text given out so far
    calls: int  # calls read so far


class ToolTurn:
    def __init__(
        self, fmt: ToolFormat, request: ToolRequest, markers: MarkerNormalizer, *, mistral_args: bool = False
    ) -> None:
        """`markers`: the answer's marker normalizer (the runtime's: `feed` normalizes with it)."""
        self.request = request
        self.markers = markers
        self.grammar = ToolGrammar(fmt, request, mistral_args=mistral_args)
        self.stream = ToolCallStream(fmt, request.tools, thinking=markers.thinking)
        self.calls: list[ToolCall | InvalidCall] = []
        self.constrained = request.forced  # a grammar holds the answer (from the start, or since a call opened)
        self._marks: list[_Mark] = []
        self._read = ""  # all the canonical text read
        self._raw = ""  # all the model's own text
        self._shown = 0
        self._swallow = 0  # text given again after a restart that was already given out
        self._dropped = False  # the answer ended inside a call after complete ones, which it ends with

    def first_grammar(self) -> str | None:
        """The grammar from the first token (a forced call), else None (lazy)."""
        if not self.request.forced:
            return None
        return self.grammar.grammar(lead=CLOSE + "\n\n" if self.markers.thinking else "")

    def feed(self, raw: str) -> tuple[str, list[ToolCall | InvalidCall], Restart | None]:
        """One token's text as the model wrote it: the answer text to show (canonical), the calls
        completed, and a restart when a call has just opened in free text."""
        before = len(self.calls)
        if not self.constrained:  # (a restart can only come in free text: no marks needed after)
            state = (copy.deepcopy(self.stream), copy.copy(self.markers))
            self._marks.append(_Mark(*state, len(self._read), len(self._raw), self._shown, before))
        piece = self.markers.feed(raw)
        self._raw += raw
        self._read += piece
        chunk = self.stream.feed(piece)
        text = self._give(chunk.text)
        self.calls.extend([*chunk.calls, *chunk.invalid])
        if self.constrained or not self.stream.in_call:
            return text, self.calls[before:], None
        start = self.stream.call_start
        assert start is not None
        # the opener in the model's own text: canonical and own text differ by the markers rewritten
        # before it (thinking) and by what the normalizer holds back at the end (after the opener)
        raw_start = start + len(self._raw) - self.markers.pending - len(self._read)
        k = max(i for i, m in enumerate(self._marks) if m.raw_start <= raw_start)
        mark = self._marks[k]
        lead, opener = self._raw[mark.raw_start : raw_start], self.stream.opener
        # back to before token k: its text and all after it are written again, under the grammar
        self.stream, self._marks = mark.stream, self._marks[:k]
        self._read, self._raw = self._read[: mark.start], self._raw[: mark.raw_start]
        self.markers.__dict__.update(mark.markers.__dict__)  # (the runtime holds this normalizer)
        self._swallow += self._shown - mark.shown  # (one restart per answer: then the grammar holds it)
        self.calls = self.calls[: mark.calls]
        self.constrained = True
        return text, self.calls[before:], Restart(k, self.grammar.grammar(opener, lead))

    def flush(self, raw: str = "") -> tuple[str, list[ToolCall | InvalidCall]]:
        """The end of the answer (`raw`: its last text, as the model wrote it): held-back text, and the
        calls completed by it (a call cut short comes as an invalid call)."""
        before = len(self.calls)
        text = []
        piece = self.markers.feed(raw) + self.markers.flush()
        for chunk in (self.stream.feed(piece), self.stream.flush()):
            text.append(self._give(chunk.text))
            self.calls.extend([*chunk.calls, *chunk.invalid])
        if any(isinstance(c, ToolCall) for c in self.calls):
            kept = [c for c in self.calls if not isinstance(c, CutShort)]
            self._dropped = len(kept) < len(self.calls)
            self.calls = kept
        return "".join(text), self.calls[before:]

    @property
    def writing(self) -> str | None:
        """The text of the call being written so far, from its opener (None when none is)."""
        return self.stream.call_text

    def end_reason(self, reason: str) -> str:
        """The answer's stop reason, its calls read (after `flush`): "tool_calls" when it ended after a
        call, by itself or cut inside a later call (dropped)."""
        if self.calls and reason == StopReason.STOP:
            return StopReason.TOOL_CALLS
        if self._dropped and reason in (StopReason.LENGTH, StopReason.CONTEXT_FULL):
            return StopReason.TOOL_CALLS
        return reason

    def _give(self, text: str) -> str:
        if self._swallow:
            cut = min(self._swallow, len(text))
            text, self._swallow = text[cut:], self._swallow - cut
        self._shown += len(text)
        return text
