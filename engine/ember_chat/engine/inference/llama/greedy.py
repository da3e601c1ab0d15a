"""Greedy decoding without the sampler's pass over the vocabulary.

llama.cpp's `llama_sampler_sample` fills a candidate array of the whole vocabulary before any sampler in
the chain runs (262,144 entries for Gemma 3, ~3 MB written per token); for plain greedy decoding the
chain then only takes the first largest logit. Reading the logits row in place and taking numpy's argmax
(also the first largest) chooses the same token without that pass. "Plain" means nothing else bends the
logits: temperature 0, no repeat/presence/frequency penalty, no grammar (a logit_bias is put on the row
in place: logit_bias.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import llama_cpp
import numpy as np

from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.inference.kv.prefix import resume_point
from ember_chat.engine.inference.llama.logit_bias import LogitBias


def is_plain_greedy(params: SamplingParams) -> bool:
    """Temperature 0 with no penalty and no grammar: the token is the first largest logit."""
    return (
        params.temperature == 0.0
        and params.repeat_penalty == 1.0
        and params.presence_penalty == 0.0
        and params.frequency_penalty == 0.0
        and params.grammar is None
    )


def argmax_token(ctx: llama_cpp.llama_context_p, row: int, n_vocab: int) -> int:
    """The token with the first largest logit in this output row of the last llama_decode (-1: the last),
    read in place (no copy). (Only logits with a NaN, a model already broken, could make it differ from
    llama.cpp's greedy sampler, which never picks a NaN.)"""
    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, row), shape=(n_vocab,))
    return int(logits.argmax())


def generate_greedy(llm: llama_cpp.Llama, tokens: list[int], bias: LogitBias | None = None) -> Iterator[int]:
    """Like `Llama.generate` at temperature 0 with no penalties (from the longest prefix of `tokens`
    already in the KV cache, endless until closed): the same tokens, without the vocabulary pass.
    `bias`: the request's logit_bias, on the logits as each token is chosen."""
    n_vocab = llm.n_vocab()
    todo = resume_point(llm, tokens)
    while True:
        llm.eval(todo)
        if bias is None:
            token = argmax_token(llm.ctx, -1, n_vocab)
        else:
            token = bias.choose(llm.ctx, -1, lambda: argmax_token(llm.ctx, -1, n_vocab))
        yield token
        todo = [token]
