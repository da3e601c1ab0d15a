"""Thinking text of reasoning models, in one canonical form: `<think>…</think>` inline in the answer's
text, wherever it came from — a model's own `<think>` tokens, gpt-oss's analysis channel, a prompt
that opens the thinking itself (DeepSeek-R1 distills), or a remote server's `reasoning_content`.

Every consumer reads that one form: `split_thinking` for a stored answer (the window's Thinking block,
the history sent back, exports), `ThinkingStream` for text as it streams (the API server's
`reasoning_content` deltas, the window while an answer streams). `MarkerNormalizer` turns a local
model's raw pieces into the canonical form as they are sampled.
"""

from __future__ import annotations

from dataclasses import dataclass

OPEN = "<think>"
CLOSE = "</think>"

# A model's own markers → the canonical ones. gpt-oss (harmony format): the analysis channel is its
# thinking; the final channel's header only introduces the answer. Gemma 4: a "thought" channel.
_OPENERS = ("<think>", "<|channel|>analysis<|message|>", "<|channel>thought")
_CLOSERS = ("</think>", "<|end|>", "<channel|>")
_DROPPED = ("<|start|>assistant<|channel|>final<|message|>", "<|channel|>final<|message|>", "<|start|>assistant")


@dataclass(frozen=True)
class Split:
    thinking: str
    answer: str
    open: bool  # the thinking has not ended (the answer has not started)


def split_thinking(text: str) -> Split:
    """An answer's thinking and its answer proper. Thinking is only recognised at the start."""
    stripped = text.lstrip()
    if not stripped.startswith(OPEN):
        return Split("", text, False)
    body = stripped[len(OPEN) :]
    end = body.find(CLOSE)
    if end < 0:
        return Split(body.strip("\n"), "", True)
    return Split(body[:end].strip("\n"), body[end + len(CLOSE) :].lstrip("\n"), False)


def answer_only(text: str) -> str:
    return split_thinking(text).answer


def prompt_opens_thinking(prompt: str) -> bool:
    """The chat template's generation prompt ends inside a thinking block (DeepSeek-R1 distills put
    `<think>\\n` there): the model's output starts as thinking without an opening marker."""
    tail = prompt.rstrip()
    return tail.endswith(OPEN) or tail.endswith(_OPENERS[1])


class MarkerNormalizer:
    """Streams a local model's pieces into canonical text, holding back what may be the start of a
    marker split over several pieces. `thinking` says whether the text so far is inside thinking."""

    def __init__(self, thinking: bool = False, opened_by_prompt: bool = False) -> None:
        """`thinking`: the text continues inside thinking (an interrupted answer being continued);
        `opened_by_prompt`: the prompt opened it, so the output gets the opening marker it lacks."""
        self.thinking = thinking or opened_by_prompt
        self._pending = ""
        self._prefix = OPEN + "\n" if opened_by_prompt else ""

    def feed(self, piece: str) -> str:
        text, self._pending = self._pending + piece, ""
        out = [self._prefix]
        self._prefix = ""
        while text:
            marker, at = self._next_marker(text)
            if marker is None:
                keep = _partial_marker_suffix(text)
                out.append(text[: len(text) - keep])
                self._pending = text[len(text) - keep :]
                break
            out.append(text[:at])
            text = text[at + len(marker) :]
            if marker in _OPENERS and not self.thinking:
                out.append(OPEN)
                self.thinking = True
            elif marker in _CLOSERS and self.thinking:
                out.append(CLOSE)
                self.thinking = False
            elif marker not in _DROPPED:
                out.append(marker)  # a marker out of place is shown as it is
        return "".join(out)

    def flush(self) -> str:
        text, self._pending = self._pending, ""
        return text

    @property
    def pending(self) -> int:
        """Characters fed and held back (they may start a marker): not in the output yet."""
        return len(self._pending)

    @staticmethod
    def _next_marker(text: str) -> tuple[str | None, int]:
        best: tuple[str | None, int] = (None, len(text))
        for marker in (*_DROPPED, *_OPENERS, *_CLOSERS):  # longer dropped headers before their parts
            at = text.find(marker)
            if 0 <= at < best[1]:
                best = (marker, at)
        return best


def _partial_marker_suffix(text: str) -> int:
    """Length of the longest end of `text` that is the beginning of a marker."""
    longest = 0
    for marker in (*_OPENERS, *_CLOSERS, *_DROPPED):
        for n in range(min(len(marker) - 1, len(text)), longest, -1):
            if text.endswith(marker[:n]):
                longest = n
                break
    return longest


class ThinkingStream:
    """Splits canonical text as it streams into (thinking, answer) parts."""

    def __init__(self) -> None:
        self.state = "start"  # start → thinking → answer, or start → answer
        self._pending = ""
        self._trim = False  # the newlines right after a marker belong to neither part

    def feed(self, text: str) -> tuple[str, str]:
        text, self._pending = self._pending + text, ""
        thinking, answer = [], []
        while text:
            if self.state == "start":
                stripped = text.lstrip()
                if not stripped:
                    self._pending = text
                    break
                if stripped.startswith(OPEN):
                    self.state = "thinking"
                    self._trim = True
                    text = stripped[len(OPEN) :]
                elif OPEN.startswith(stripped):
                    self._pending = text  # maybe the start of <think>
                    break
                else:
                    self.state = "answer"
            elif self.state == "thinking":
                if self._trim:
                    text = text.lstrip("\n")
                    self._trim = not text
                    if not text:
                        break
                end = text.find(CLOSE)
                if end >= 0:
                    thinking.append(text[:end])
                    self.state = "answer"
                    self._trim = True
                    text = text[end + len(CLOSE) :]
                    continue
                keep = next((n for n in range(min(len(CLOSE) - 1, len(text)), 0, -1) if text.endswith(CLOSE[:n])), 0)
                thinking.append(text[: len(text) - keep])
                self._pending = text[len(text) - keep :]
                break
            else:
                if self._trim:
                    text = text.lstrip("\n")
                    self._trim = not text
                answer.append(text)
                break
        return "".join(thinking), "".join(answer)

    def flush(self) -> tuple[str, str]:
        text, self._pending = self._pending, ""
        return (text, "") if self.state == "thinking" else ("", text)
