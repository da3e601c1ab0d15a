"""The scripted tiny models other tests rely on (tests/helpers/gguf_factory.py): llama.cpp itself, without
Ember, gives the scripted next token `Script.LOGIT` above every other one, after any token, and the
tokens of a flat script all the same logit."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import llama_cpp
import numpy as np
import pytest

from ember_chat.engine.inference.llama.loader import plain_llama
from tests.helpers.gguf_factory import Script, TinySpec, any_of, says, vocabulary, write_tiny_model


@contextmanager
def llama(path: Path) -> Iterator[llama_cpp.Llama]:
    llm = plain_llama(path, n_ctx=64, n_threads=1, n_threads_batch=1, verbose=False)
    try:
        yield llm
    finally:
        llm.close()


def logits_after(llm: llama_cpp.Llama, token: int) -> np.ndarray:
    llm.reset()
    llm.eval([token])
    raw = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
    return np.ctypeslib.as_array(raw, shape=(llm.n_vocab(),)).copy()


def test_each_token_decides_the_next(tmp_path: Path) -> None:
    spec = TinySpec(think_tokens=True, script=says("▁hello", "▁world", "</think>", "<0xE6>", "</s>"))
    ids = {t: i for i, t in enumerate(vocabulary()[0] + ["<think>", "</think>"])}
    with llama(write_tiny_model(tmp_path / "says.gguf", spec)) as llm:
        # the script, and any other token (the last one of a prompt) leading to its start
        steps = [("▁hello", "▁world"), ("▁world", "</think>"), ("</think>", "<0xE6>"), ("<0xE6>", "</s>")]
        steps += [("</s>", "▁hello"), ("<s>", "▁hello"), ("\n", "▁hello"), ("<think>", "▁hello")]
        for current, following in steps:
            logits = logits_after(llm, ids[current])
            others = np.delete(logits, ids[following])
            assert logits[ids[following]] == pytest.approx(Script.LOGIT, abs=0.1), (current, following)
            assert np.abs(others).max() < 1e-3, (current, following)


def test_a_flat_script_gives_its_tokens_one_logit(tmp_path: Path) -> None:
    tokens = ("▁hello", "▁world", "!", "?")
    ids = {t: i for i, t in enumerate(vocabulary()[0])}
    with llama(write_tiny_model(tmp_path / "flat.gguf", TinySpec(script=any_of(*tokens)))) as llm:
        for current in ("▁hello", "?", "<s>"):
            logits = logits_after(llm, ids[current])
            chosen = [ids[t] for t in tokens]
            assert logits[chosen] == pytest.approx([Script.LOGIT] * len(tokens), abs=0.1)
            assert np.abs(np.delete(logits, chosen)).max() < 1e-3


def test_a_script_names_only_tokens_of_the_vocabulary(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="not in the vocabulary"):
        write_tiny_model(tmp_path / "bad.gguf", TinySpec(script=says("▁hello", "<think>")))  # no think tokens
    with pytest.raises(AssertionError):
        says("▁hello", "▁world", "▁hello")  # a token can decide only one next token
