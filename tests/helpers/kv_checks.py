"""Checks of a model's KV cache against llama-cpp-python's record of it."""

from __future__ import annotations

import llama_cpp


def assert_cache_matches_record(llm: llama_cpp.Llama) -> None:
    """The KV cache holds exactly the positions llama-cpp-python's n_tokens says (seq 0: 0 … n_tokens-1)."""
    memory = llama_cpp.llama_get_memory(llm.ctx)
    assert llama_cpp.llama_memory_seq_pos_max(memory, 0) == llm.n_tokens - 1
