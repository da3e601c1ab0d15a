"""One answer's tool calls as the local runtime generates it: the calls are read from the text as it
streams (ToolCallStream), and held to their tools' schemas by a grammar (ToolGrammar).

The grammar is lazy, as llama.cpp's is for llama-server: the model writes freely (thinking, text) until
a call opens; then the runtime takes back the tokens from the one the call's opener starts in, and
generates again from there under the grammar of the call (the part of that token before the opener
is the grammar's `lead`, so it is written again, not lost). What the user was already shown is not
shown twice: the parser is put back as it was before that token, and the text it gives again is
swallowed. With `tool_choice` required or a named tool, the grammar holds the answer from its first
token instead.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from ember_chat.engine.core.tools import InvalidCall, ToolCall, ToolRequest
from ember_chat.engine.inference.tool_calls import ToolCallStream
from ember_chat.engine.inference.tool_formats import ToolFormat
from ember_chat.engine.inference.tool_grammar import ToolGrammar


@dataclass(frozen=True)
class Restart:
    """Generate again from `keep` tokens of the answer (those after are taken back), under `grammar`."""

    keep: int
    grammar: str


@dataclass(frozen=True)
class _Mark:
    """The state before one token of the answer was read."""

    stream: ToolCallStream
    start: int  # where the token's text starts, in all the text read
    shown: int  # characters of answer text given out so far
    calls: int  # calls read so far


class ToolTurn:
    def __init__(
        self, fmt: ToolFormat, request: ToolRequest, *, thinking: bool = False, mistral_args: bool = False
    ) -> None:
        """`thinking`: the answer starts inside a thinking block (its `<think>` ended the prompt)."""
        self.request = request
        self.grammar = ToolGrammar(fmt, request, mistral_args=mistral_args)
        self.stream = ToolCallStream(fmt, request.tools, thinking=thinking)
        self.calls: list[ToolCall | InvalidCall] = []
        self.constrained = request.forced  # a grammar holds the answer (from the start, or since a call opened)
        self._marks: list[_Mark] = []
        self._read = ""  # all the text read
        self._shown = 0
        self._swallow = 0  # text given again after a restart that was already given out

    def first_grammar(self) -> str | None:
        """The grammar from the first token (a forced call), else None (lazy)."""
        return self.grammar.grammar() if self.request.forced else None

    def feed(self, piece: str) -> tuple[str, list[ToolCall | InvalidCall], Restart | None]:
        """One token's text (canonical): the answer text to show, the calls completed, and a restart
        when a call has just opened in free text."""
        before = len(self.calls)
        self._marks.append(_Mark(copy.deepcopy(self.stream), len(self._read), self._shown, before))
        self._read += piece
        chunk = self.stream.feed(piece)
        text = self._give(chunk.text)
        self.calls.extend([*chunk.calls, *chunk.invalid])
        if self.constrained or not self.stream.in_call:
            return text, self.calls[before:], None
        start = self.stream.call_start
        assert start is not None
        k = max(i for i, mark in enumerate(self._marks) if mark.start <= start)
        mark = self._marks[k]
        lead, opener = self._read[mark.start : start], self.stream.opener
        # back to before token k: its text and all after it are written again, under the grammar
        self.stream, self._read, self._marks = mark.stream, self._read[: mark.start], self._marks[:k]
        self._swallow += self._shown - mark.shown  # (one restart per answer: then the grammar holds it)
        self.calls = self.calls[: mark.calls]
        self.constrained = True
        return text, self.calls[before:], Restart(k, self.grammar.grammar(opener, lead))

    def flush(self, piece: str = "") -> tuple[str, list[ToolCall | InvalidCall]]:
        """The end of the answer (`piece`: its last text): held-back text, and the calls completed by
        it (a call cut short comes as an invalid call)."""
        before = len(self.calls)
        text = []
        for chunk in (self.stream.feed(piece), self.stream.flush()):
            text.append(self._give(chunk.text))
            self.calls.extend([*chunk.calls, *chunk.invalid])
        return "".join(text), self.calls[before:]

    def _give(self, text: str) -> str:
        if self._swallow:
            cut = min(self._swallow, len(text))
            text, self._swallow = text[cut:], self._swallow - cut
        self._shown += len(text)
        return text
