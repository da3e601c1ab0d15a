"""The prompt of a fill-in-the-middle request, as llama.cpp's server builds it (format_prompt_infill,
PSM order): [other files] [BOS] <fim_pre> prefix prompt <fim_suf> suffix <fim_mid>, and the model
writes the middle. Built from token ids: the user's text is tokenized with no special tokens parsed, so
a `<fim_mid>` typed in a file stays text and cannot move the cursor."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import llama_cpp

from ember_chat.engine.core.infill import Infill

# Between other files when the model has no file separator token (llama.cpp's, as it writes it)
SNIPPET_SEPARATOR = "\n\n--- snippet ---\n\n"
REPO_NAME = "myproject\n"  # after <fim_rep>, as llama.cpp names the repository
CURRENT_FILE = "filename\n"  # after the last <fim_sep>: the file being edited (llama.cpp's placeholder)


class FimTokens(NamedTuple):
    """A model's fill-in-the-middle tokens; `sep` and `rep` are None where it has none."""

    pre: int
    suf: int
    mid: int
    sep: int | None = None
    rep: int | None = None


def read_fim_tokens(vocab: llama_cpp.llama_vocab_p) -> FimTokens | None:
    """A model's fill-in-the-middle tokens (its GGUF's tokenizer.ggml.fim_pre/suf/mid_token_id, or the
    tokens llama.cpp recognises by their text), or None when it lacks any of the three."""

    def token(read: Callable[[llama_cpp.llama_vocab_p], int]) -> int | None:
        t = int(read(vocab))
        return None if t == llama_cpp.LLAMA_TOKEN_NULL else t

    pre, suf, mid = (token(f) for f in (llama_cpp.llama_vocab_fim_pre, llama_cpp.llama_vocab_fim_suf,
                                         llama_cpp.llama_vocab_fim_mid))  # fmt: skip
    if pre is None or suf is None or mid is None:
        return None
    return FimTokens(pre, suf, mid, token(llama_cpp.llama_vocab_fim_sep), token(llama_cpp.llama_vocab_fim_rep))


def infill_tokens(fim: FimTokens, infill: Infill, tokenize: Callable[[str], list[int]], bos: int | None) -> list[int]:
    """The prompt's tokens. `tokenize`: text → tokens, no special tokens parsed, no BOS; `bos`: the
    token the model's prompts begin with, if it adds one."""
    extra: list[int] = []
    if infill.extra:
        if fim.rep is not None:
            extra += [fim.rep, *tokenize(REPO_NAME)]
        for name, text in infill.extra:
            extra += [fim.sep, *tokenize(name + "\n")] if fim.sep is not None else tokenize(SNIPPET_SEPARATOR)
            extra += tokenize(text)
        if fim.sep is not None:
            extra += [fim.sep, *tokenize(CURRENT_FILE)]
    # (llama.cpp puts the other files before the BOS; the same tokens as its server, the same answers)
    head = [*extra, bos] if bos is not None else extra
    prefix = [fim.pre, *tokenize(infill.prefix), *tokenize(infill.prompt)]
    return [*head, *prefix, fim.suf, *tokenize(infill.suffix), fim.mid]
