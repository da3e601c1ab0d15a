"""Batched decoding (engine/inference/batch_decode.py) on the real starter model (Gemma 3 270M): several
sequences of one llama.cpp context decoded together give the greedy tokens each gives alone and that
`Llama.generate` gives on seq 0; slots are re-used by prefix, saved to and restored from the snapshot
store, and a context whose cells run out ends the youngest run.

What llama.cpp's CPU numerics allow (measured, /tmp/h20/B_facts.md): a sequence's logits are bit-identical
alone and in a batch of up to 3 rows (flash attention on: without it, the summation order of attention
depends on where a sequence's cells lie in the shared cache); 4 or more rows in one decode go through other
matmul kernels (gemm), so there a greedy choice may flip where the two best tokens are nearly tied."""

from __future__ import annotations

import llama_cpp
import llama_cpp.llama
import pytest

from ember_chat.engine.core.params import SPECS, LoadConfig, LoadOptions
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.inference.llama_loader import open_llama


def test_parallel_is_a_load_parameter() -> None:
    spec = SPECS["parallel"]
    assert (spec.default, spec.low, spec.high) == (4, 1, 16)
    assert LoadOptions().parallel == 4
    assert LoadConfig("m.gguf", parallel=16).parallel == 16
    for wrong in (0, 17):
        with pytest.raises(InvalidParameter, match="parallel sequences"):
            LoadConfig("m.gguf", parallel=wrong)


def test_the_context_has_parallel_plus_one_sequences_sharing_all_its_cells(starter_model) -> None:
    original = llama_cpp.llama.llama_cpp.llama_context_default_params
    llm = open_llama(LoadConfig(starter_model, n_ctx=512, parallel=3, threads=2))
    try:
        ctx = llm._ctx.ctx
        assert llama_cpp.llama_n_seq_max(ctx) == 4  # seq 0 (llama-cpp-python's own) + 3 slots
        assert llama_cpp.llama_n_ctx_seq(ctx) == 512  # unified: every sequence may use all the cells
    finally:
        llm.close()
    assert llama_cpp.llama.llama_cpp.llama_context_default_params is original  # the patch is undone
