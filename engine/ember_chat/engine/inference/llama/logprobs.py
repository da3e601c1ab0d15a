"""Log-probabilities of sampled tokens (OpenAI's `logprobs`/`top_logprobs`), from the logits llama.cpp
already holds for the last evaluated position: one log-softmax over the vocabulary per token, only
when asked for. They are the model's own distribution (before temperature, penalties and grammar)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember_chat.engine.core.logprobs import TokenLogprob


def token_logprob(ctx: Any, n_vocab: int, token: int, top: int, piece: Callable[[int], bytes]) -> TokenLogprob:
    """`token`'s entry from the logits of the last evaluated position of llama.cpp context `ctx`."""
    import llama_cpp
    import numpy as np

    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(n_vocab,)).astype(np.float64)
    peak = float(logits.max())
    log_z = peak + float(np.log(np.exp(logits - peak).sum()))
    best: tuple[tuple[int, bytes, float], ...] = ()
    if top > 0:
        ids = np.argpartition(-logits, min(top, n_vocab - 1))[:top]
        ids = ids[np.argsort(-logits[ids], kind="stable")]
        best = tuple((int(i), piece(int(i)), float(logits[i]) - log_z) for i in ids)
    return TokenLogprob(token, piece(token), float(logits[token]) - log_z, best)
