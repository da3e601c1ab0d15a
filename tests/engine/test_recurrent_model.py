"""A recurrent model (a tiny Mamba written at test time): its memory cannot drop a suffix, so llama.cpp
refuses to cut seq 0 back to a shared prefix. A prompt that leaves the cached tokens part way (an edited
message, a regenerated answer) is then evaluated from the start, on every path of the runtime (sampling,
greedy, a long prompt evaluated in chunks), instead of failing in llama_decode; the answer is the one a
fresh model gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.inference.events import Finished
from ember_chat.engine.inference.local.runtime import LocalRuntime
from tests.helpers.gguf_factory import write_tiny_mamba

WORDS = "the sea is wide and the boats are small but the sailors are brave and they sing " * 3


def answer(rt: LocalRuntime, prompt: str, params: SamplingParams) -> tuple[str, int]:
    finished = [e for e in rt.complete(prompt, params) if isinstance(e, Finished)]
    assert len(finished) == 1 and finished[0].metrics is not None
    return finished[0].text, finished[0].metrics.prompt_tokens_reused


@pytest.mark.parametrize(
    "params",
    [SamplingParams(temperature=0.0, max_tokens=8), SamplingParams(temperature=0.8, max_tokens=8, seed=7)],
    ids=["greedy", "sampled"],
)
def test_an_edited_prompt_on_a_recurrent_model_is_evaluated_from_the_start(
    tmp_path: Path, params: SamplingParams
) -> None:
    config = LoadConfig(write_tiny_mamba(tmp_path / "mamba.gguf"), n_ctx=512, n_batch=16, parallel=1, threads=1)
    first, edited = WORDS + "Tell me more.", WORDS[:30] + " rivers run to the sea " + WORDS
    fresh = LocalRuntime()
    try:
        fresh.load(config)
        expected, _ = answer(fresh, edited, params)
    finally:
        fresh.close()
    rt = LocalRuntime()
    try:
        rt.load(config)
        answer(rt, first, params)  # seq 0 holds `first` and an answer
        text, reused = answer(rt, edited, params)  # shares its first words with it: the cut is refused
        assert (text, reused) == (expected, 0)
        # the next turn goes on from all seq 0 holds (the prompt and its answer): nothing to cut, all reused
        _, reused = answer(rt, edited + text + " And then?", params)
        assert reused > len(rt.tokenize(edited))
    finally:
        rt.close()
