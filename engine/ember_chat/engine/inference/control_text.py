"""Text from messages, files and tools never becomes a control token (`ControlText`).

A chat prompt is tokenized with special tokens parsed, so that the template's own markers
(`<|im_start|>`, `<start_of_turn>`, …) become the model's control tokens. Text that came from anyone
but the template (a message, an attachment, a tool's description or result, a continued answer) must
not: `<|im_end|>\\n<|im_start|>system` in a file would otherwise end the user's turn and open a system
turn of the file's choosing.

So the content is *defused* before the template sees it: every occurrence of a control token's text
becomes a sentinel (U+FDD0, the text's number, U+FDD1; noncharacters, which no template trims or
escapes), content that is ordinary text is left exactly as it is (what a template does with it, and
the tokens of earlier turns, do not change). The rendered prompt is then tokenized piece by piece:
the text between sentinels with special tokens parsed (the template's markers, and the content,
which holds none any more), each sentinel's text as plain text. The sentinels depend only on the text
they stand for, so the same conversation renders to the same text turn after turn and the KV-cache
prefix is reused as before.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable, Iterable
from typing import TypeVar

import llama_cpp

OPEN = "\ufdd0"
CLOSE = "\ufdd1"
_SENTINEL = re.compile(f"{OPEN}([0-9]+){CLOSE}")

T = TypeVar("T")

# tokenize(text, special): the model's tokens for `text`, special tokens' text parsed or not
Tokenize = Callable[[str, bool], list[int]]


def _trie_pattern(words: Iterable[str]) -> str:
    """One regex matching any of `words`, the longest at each position (as llama.cpp's tokenizer takes
    the longer of two overlapping special tokens): a trie, so thousands of `<unusedN>` tokens cost
    a few character tests per position, not one test per token."""
    trie: dict[str, dict] = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def pattern(node: dict[str, dict]) -> str:
        ends = "" in node
        branches = [re.escape(ch) + pattern(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if ends:  # a word ends here and longer ones go on: the longer first (greedy)
            return f"(?:{body})?"
        return body

    return pattern(trie)


class ControlText:
    """The texts of a model's control tokens, and how content is kept from becoming them."""

    def __init__(self, texts: Iterable[str]) -> None:
        # (blank texts left out: defusing every space or newline would cut all content into pieces)
        words = sorted({t for t in texts if t.strip()})
        # number 0 is the sentinel's own opener, so content that holds it cannot fake a sentinel
        self._texts = (OPEN, *words)
        self._numbers = {t: i for i, t in enumerate(self._texts)}
        self._find = re.compile(_trie_pattern(self._texts)) if words else re.compile(re.escape(OPEN))

    @classmethod
    def of_model(cls, model: llama_cpp.llama_model_p) -> ControlText:
        """The texts llama.cpp reads as tokens only when told to parse special tokens (control and
        unknown tokens; user-defined ones are parsed in any text, like any other word of the vocabulary)."""
        vocab = llama_cpp.llama_model_get_vocab(model)
        special = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
        texts = []
        for token in range(llama_cpp.llama_vocab_n_tokens(vocab)):
            if llama_cpp.llama_vocab_get_attr(vocab, token) & special:
                raw = llama_cpp.llama_vocab_get_text(vocab, token)
                if raw:
                    texts.append(ctypes.string_at(raw).decode("utf-8", errors="replace"))
        return cls(texts)

    @property
    def texts(self) -> tuple[str, ...]:
        """The control tokens' texts (without the sentinel opener)."""
        return self._texts[1:]

    def defuse(self, value: T) -> T:
        """`value` (a string, or lists and dicts of them, as templates are given messages and tools) with
        every control token's text replaced by its sentinel; other values as they are."""
        if isinstance(value, str):
            if OPEN not in value and not self._find.search(value):
                return value  # (the usual case: nothing to do, and no copy)
            return self._find.sub(lambda m: f"{OPEN}{self._numbers[m.group()]}{CLOSE}", value)  # type: ignore[return-value]
        if isinstance(value, dict):
            return {self.defuse(k): self.defuse(v) for k, v in value.items()}  # type: ignore[return-value]
        if isinstance(value, list | tuple):
            return type(value)(self.defuse(v) for v in value)  # type: ignore[return-value]
        return value

    def restore(self, text: str) -> str:
        """A defused text as it was written (for people to read, never to tokenize)."""
        return _SENTINEL.sub(lambda m: self._texts[int(m.group(1))], text)

    def parts(self, text: str) -> list[tuple[str, bool]]:
        """A rendered prompt cut where it changes between the template's own text (True: tokenized with
        special tokens parsed) and what sentinels stand for (False: plain text; sentinels next to each
        other make one part)."""
        if OPEN not in text:
            return [(text, True)] if text else []
        out: list[tuple[str, bool]] = []
        at = 0
        for m in _SENTINEL.finditer(text):
            if m.start() > at:
                out.append((text[at : m.start()], True))
            number = int(m.group(1))
            plain = self._texts[number] if number < len(self._texts) else m.group()
            if out and not out[-1][1]:
                out[-1] = (out[-1][0] + plain, False)
            else:
                out.append((plain, False))
            at = m.end()
        if at < len(text):
            out.append((text[at:], True))
        return out

    def tokens(self, text: str, tokenize: Tokenize) -> list[int]:
        """The tokens of a rendered prompt, part by part (see `parts`). A text without sentinels is
        tokenized in one call, exactly as before there were any."""
        if OPEN not in text:
            return tokenize(text, True)
        return [token for part, special in self.parts(text) for token in tokenize(part, special)]
