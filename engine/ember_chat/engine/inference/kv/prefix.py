"""The longest prefix of a prompt already in a KV cache, and resuming llama-cpp-python's sequence 0 from it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (the snapshot store imports this module before any model is opened)
    import llama_cpp


def resume_point(llm: llama_cpp.Llama, tokens: list[int]) -> list[int]:
    """Prepare `llm` to continue from the longest prefix of `tokens` already in its KV cache (at least the
    last token is evaluated again, for its logits); the tokens still to evaluate."""
    held = llm.input_ids[: llm.n_tokens].tolist()
    return tokens[keep_seq0(llm, min(common_prefix(held, tokens), len(tokens) - 1)) :]


def keep_seq0(llm: llama_cpp.Llama, keep: int) -> int:
    """Seq 0 cut back to its first `keep` tokens (at most what it holds); returns how many it keeps: `keep`,
    or 0 when llama.cpp refuses the cut — a recurrent or hybrid model's memory (Mamba, RWKV, Granite 4…)
    cannot drop a suffix — and seq 0 is emptied instead, the prompt evaluated from the start (as
    `Llama.generate` does)."""
    if keep > 0 and (keep == llm.n_tokens or llm._ctx.kv_cache_seq_rm(-1, keep, -1)):
        llm.n_tokens = keep
        return keep
    llm.reset()
    return 0


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens a and b share (slice comparisons: C speed, log n of them)."""
    if type(a) is not type(b):
        a, b = list(a), list(b)
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo
