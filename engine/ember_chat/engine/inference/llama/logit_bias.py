"""OpenAI's `logit_bias` on llama.cpp's logits: the biases are added to the logits row in place just
before a token is chosen and taken off again right after, so every way Ember chooses a token (the
greedy argmax, a sampler chain, the grammar's two-step sampling, a run of the batch decoder) sees them,
and the log-probabilities read afterwards stay the model's own. A bias of -100 bans the token (its
logit becomes -inf: never chosen, at any temperature); any other is added as it is (+100 practically
forces the token, as OpenAI says)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import llama_cpp
import numpy as np
from llama_cpp._internals import LlamaSampler

from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.inference.kv.prefix import resume_point


class LogitBias:
    """A request's biases, ready for a vocabulary of `n_vocab` tokens."""

    def __init__(self, pairs: tuple[tuple[int, float], ...], n_vocab: int) -> None:
        check_logit_bias(pairs, n_vocab)
        self.n_vocab = n_vocab
        self._ids = np.array([token for token, _bias in pairs], dtype=np.intp)
        self._bias = np.array([-np.inf if bias <= -100 else bias for _token, bias in pairs], dtype=np.float32)

    def choose(self, ctx: llama_cpp.llama_context_p, row: int, pick: Callable[[], int]) -> int:
        """`pick()`'s token with the biases on this output row's logits (-1: the last)."""
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, row), shape=(self.n_vocab,))
        kept = logits[self._ids]  # (a copy: fancy indexing)
        logits[self._ids] = kept + self._bias
        try:
            return pick()
        finally:
            logits[self._ids] = kept


def check_logit_bias(pairs: tuple[tuple[int, float], ...], n_vocab: int) -> None:
    """InvalidParameter (the API's 400) naming the first token id the vocabulary does not have."""
    outside = next((token for token, _bias in pairs if token >= n_vocab), None)
    if outside is not None:
        raise InvalidParameter(
            f"logit_bias: token {outside} is not in the model's vocabulary (token ids 0 to {n_vocab - 1:,})."
        )


def generate_sampler(llm: llama_cpp.Llama, params: SamplingParams) -> LlamaSampler:
    """The sampler chain `Llama.generate` builds for these parameters (no grammar, no Python pass)."""
    return llm._init_sampler(
        top_k=params.top_k,
        top_p=params.top_p,
        min_p=params.min_p,
        temp=params.temperature,
        repeat_penalty=params.repeat_penalty,
        frequency_penalty=params.frequency_penalty,
        presence_penalty=params.presence_penalty,
    )


def generate_biased(llm: llama_cpp.Llama, tokens: list[int], params: SamplingParams, bias: LogitBias) -> Iterator[int]:
    """Like `Llama.generate` (the same sampler chain, from the longest prefix of `tokens` already in the
    KV cache, endless until closed) with the biases on the logits: its own loop, as `generate` has no
    place to put them but a Python pass over the whole vocabulary."""
    chain = generate_sampler(llm, params)
    ctx = llm.ctx
    try:
        todo = resume_point(llm, tokens)
        while True:
            llm.eval(todo)
            # (llama_sampler_sample also accepts the token into the chain: the penalties see it)
            token = bias.choose(ctx, -1, lambda: int(llama_cpp.llama_sampler_sample(chain.sampler, ctx, -1)))
            yield token
            todo = [token]
    finally:
        chain.close()
