"""The longest prefix of a prompt already in a KV cache, and resuming llama-cpp-python's sequence 0 from it."""

from __future__ import annotations

import llama_cpp


def resume_point(llm: llama_cpp.Llama, tokens: list[int]) -> list[int]:
    """Prepare `llm` to continue from the longest prefix of `tokens` already in its KV cache (at least the
    last token is evaluated again, for its logits); the tokens still to evaluate."""
    held = llm.input_ids[: llm.n_tokens].tolist()
    reuse = min(common_prefix(held, tokens), len(tokens) - 1)
    if reuse > 0:
        llm.n_tokens = reuse  # (eval drops the KV cells after it)
    else:
        llm.reset()
    return tokens[reuse:]


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
