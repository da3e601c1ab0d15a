"""Plain greedy decoding reads the logits' argmax in place (engine/inference/llama/greedy.py) instead of running
llama.cpp's sampler over the whole vocabulary: on the real starter model (Gemma 3 270M, 262,144 tokens) it
chooses exactly the tokens llama-cpp-python's own greedy `generate` chooses, from a fresh cache and from a
cached prefix; anything that bends the logits keeps the sampler chain."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import llama_cpp
import pytest

from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.inference.kv.prefix import common_prefix
from ember_chat.engine.inference.llama.batch_decode import sampler_chain
from ember_chat.engine.inference.llama.greedy import argmax_token, generate_greedy, is_plain_greedy
from ember_chat.engine.inference.llama.loader import open_llama
from tests.helpers.gguf_factory import write_tiny_mamba

PROMPTS = (
    "The history of the Roman Empire begins",
    'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n',
    "Once upon a time, in a small village by the sea, there lived an old fisherman who",
)
N = 40


def test_only_temperature_zero_with_nothing_bending_the_logits_is_plain_greedy() -> None:
    assert is_plain_greedy(SamplingParams(temperature=0.0))
    assert not is_plain_greedy(SamplingParams(temperature=0.7))
    assert not is_plain_greedy(SamplingParams(temperature=0.0, repeat_penalty=1.1))
    assert not is_plain_greedy(SamplingParams(temperature=0.0, presence_penalty=0.5))
    assert not is_plain_greedy(SamplingParams(temperature=0.0, frequency_penalty=-0.5))
    assert not is_plain_greedy(SamplingParams(temperature=0.0, grammar='root ::= "a"'))


@pytest.fixture(scope="module")
def llm(starter_model: Path) -> Iterator[llama_cpp.Llama]:
    model = open_llama(LoadConfig(starter_model, n_ctx=512, n_batch=64, parallel=1, threads=1))
    yield model
    model.close()


def take(gen: Iterator[int], n: int) -> list[int]:
    try:
        return list(itertools.islice(gen, n))
    finally:
        gen.close()  # type: ignore[attr-defined]


def test_the_argmax_path_gives_llama_cpp_pythons_greedy_tokens(llm: llama_cpp.Llama) -> None:
    for text in PROMPTS:
        tokens = llm.tokenize(text.encode())
        llm.reset()
        expected = take(llm.generate(tokens, temp=0.0, repeat_penalty=1.0), N)
        llm.reset()
        assert take(generate_greedy(llm, tokens), N) == expected, text
        # again from the cache (the prompt and part of the answer already evaluated): only the rest is evaluated
        longer = tokens + expected[: N // 2]
        llama_cpp.llama_perf_context_reset(llm.ctx)
        assert take(generate_greedy(llm, longer), N // 2) == expected[N // 2 :]
        perf = llama_cpp.llama_perf_context(llm.ctx)
        assert (
            perf.n_p_eval + perf.n_eval <= N // 2 + 1 < len(longer)
        )  # not the prompt again: one token, then the answer's


def test_the_argmax_of_each_row_is_the_greedy_samplers_choice(llm: llama_cpp.Llama) -> None:
    """The batch decoder's path: the token read from a row's logits = the greedy chain's sample of it."""
    chain = sampler_chain(SamplingParams(temperature=0.0), 0, llm.n_vocab(), llm.last_n_tokens_size)
    try:
        llm.reset()
        tokens = llm.tokenize(PROMPTS[2].encode())
        for _ in range(N):
            llm.eval(tokens)
            mine = argmax_token(llm.ctx, -1, llm.n_vocab())
            assert mine == int(llama_cpp.llama_sampler_sample(chain, llm.ctx, -1))
            tokens = [mine]
    finally:
        llama_cpp.llama_sampler_free(chain)


def test_common_prefix_counts_the_shared_leading_tokens_of_lists_and_tuples() -> None:
    tokens = list(range(1000))
    assert common_prefix(tokens, [*tokens, 7]) == 1000
    assert common_prefix(tokens, [*tokens[:613], -1, *tokens[614:]]) == 613
    assert common_prefix(tuple(tokens), [*tokens[:5], 99]) == 5  # (a snapshot's tuple against a prompt's list)
    assert common_prefix([], tokens) == 0 and common_prefix([1], [2]) == 0


def test_a_recurrent_model_that_cannot_cut_its_memory_is_evaluated_from_the_start(tmp_path: Path) -> None:
    """A Mamba's memory cannot drop a suffix (llama.cpp refuses the cut): a prompt that leaves the cached
    tokens part way (an edited message, a regenerated answer) is evaluated from the start, as
    `Llama.generate` does, instead of failing in llama_decode."""
    llm = open_llama(LoadConfig(write_tiny_mamba(tmp_path / "mamba.gguf"), n_ctx=256, parallel=1, threads=1))
    try:
        first = llm.tokenize(b"The sea is wide and the boats are small")
        edited = [*first[:4], *llm.tokenize(b" rivers run to it", add_bos=False)]
        llm.reset()
        expected = take(llm.generate(edited, temp=0.0, repeat_penalty=1.0), 8)
        llm.reset()
        take(generate_greedy(llm, first), 8)  # the cache holds `first` and an answer
        assert not llm._ctx.kv_cache_seq_rm(-1, 4, -1)  # (what makes this model different)
        assert take(generate_greedy(llm, edited), 8) == expected
    finally:
        llm.close()
