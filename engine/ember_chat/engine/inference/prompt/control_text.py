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

Control and unknown tokens are read as tokens only where special tokens are parsed; user-defined ones
(Gemma 3's `<start_of_image>`, Qwen's `<tool_call>` and `<think>`) in any text. So a sentinel's text
that spells a user-defined token is tokenized in pieces that spell none (cut in the middle of each):
the model reads the characters, never the token. Gemma's user-defined HTML tags (`<b>`, `<table>`) in
content are read in pieces the same way; the template's own use of any of them stays one token.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable, Iterable
from typing import TypeVar

import llama_cpp

_HTML_TAG = re.compile(r"</?[a-z][a-z0-9]*>")  # letters and digits only: <b>, </td>, <h1>
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

    def __init__(self, texts: Iterable[str], user_defined: Iterable[str] = ()) -> None:
        """`texts`: the control tokens' texts (read as tokens only where special tokens are parsed);
        `user_defined`: those of user-defined tokens (read as tokens in any text), guarded as well."""
        # (blank texts left out: defusing every space or newline would cut all content into pieces)
        anywhere = sorted({t for t in user_defined if t.strip()})
        words = sorted({t for t in texts if t.strip()} | set(anywhere))
        # number 0 is the sentinel's own opener, so content that holds it cannot fake a sentinel
        self._texts = (OPEN, *words)
        self._numbers = {t: i for i, t in enumerate(self._texts)}
        self._find = re.compile(_trie_pattern(self._texts)) if words else re.compile(re.escape(OPEN))
        # what plain text must not spell either (a sentinel's text is cut where it does)
        self._anywhere = re.compile(_trie_pattern(anywhere)) if anywhere else None

    @classmethod
    def of_model(cls, model: llama_cpp.llama_model_p) -> ControlText:
        """The texts of the model's control, unknown and user-defined tokens: llama.cpp reads the first
        two as tokens when told to parse special tokens, user-defined ones in any text. A user-defined
        token that is a plain HTML tag (Gemma 3 has 164 such as `<b>`, `</td>`) is left as the model
        learned to read it: it turns nothing on, while markers such as `<start_of_image>` or `<tool_call>`
        (an underscore, a bar) do."""
        vocab = llama_cpp.llama_model_get_vocab(model)
        special = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
        user_defined = llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
        texts: list[str] = []
        anywhere: list[str] = []
        for token in range(llama_cpp.llama_vocab_n_tokens(vocab)):
            attr = llama_cpp.llama_vocab_get_attr(vocab, token)
            if attr & (special | user_defined):
                raw = llama_cpp.llama_vocab_get_text(vocab, token)
                if raw:
                    text = ctypes.string_at(raw).decode("utf-8", errors="replace")
                    if not attr & user_defined:
                        texts.append(text)
                    elif not _HTML_TAG.fullmatch(text):
                        anywhere.append(text)
        return cls(texts, anywhere)

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

    def parts(self, text: str) -> list[tuple[str, bool]]:
        """A rendered prompt cut where it changes between the template's own text (True: tokenized with
        special tokens parsed) and what sentinels stand for (False: plain text; sentinels next to each
        other make one part, cut again where it would spell a user-defined token)."""
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
        if self._anywhere is None:
            return out
        return [(piece, special) for part, special in out for piece in (self._plain(part) if not special else [part])]

    def _plain(self, text: str) -> list[str]:
        """`text` in pieces none of which spells a user-defined token: each one found is cut in the
        middle and both halves looked at again (a shorter token may lie inside), so tokenized one by
        one they give the characters' own tokens. (Ranges on a stack, not recursion nor slices: a
        message of ten thousand `<b>` is one plain part.)"""
        assert self._anywhere is not None
        pieces: list[str] = []
        todo = [(0, len(text))]
        while todo:
            start, end = todo.pop()
            at, cut = start, None
            while cut is None and (m := self._anywhere.search(text, at, end)):
                if m.end() - m.start() > 1:  # (a one-character token cannot be cut: it is that character)
                    cut = (m.start() + m.end()) // 2
                at = m.start() + 1
            if cut is None:
                pieces.append(text[start:end])
            else:
                todo += [(cut, end), (start, cut)]  # (the left one next: the pieces stay in order)
        return pieces

    def tokens(self, text: str, tokenize: Tokenize) -> list[int]:
        """The tokens of a rendered prompt, part by part (see `parts`). A text without sentinels is
        tokenized in one call, exactly as before there were any."""
        if OPEN not in text:
            return tokenize(text, True)
        return [token for part, special in self.parts(text) for token in tokenize(part, special)]
