"""Sequence 0 (llama-cpp-python's own single-sequence path) and the KV snapshot store: its
conversation is saved before another replaces it, and a prompt that shares more with a saved snapshot
than with what seq 0 holds starts from that snapshot."""

from __future__ import annotations

from typing import TYPE_CHECKING

import llama_cpp

from ember_chat.engine.inference.kv.prefix import common_prefix
from ember_chat.engine.inference.llama.seq_state import clear_seq, restore_seq, seq_state, trim_seq

if TYPE_CHECKING:
    from ember_chat.engine.inference.kv.snapshot_keys import SnapshotKey
    from ember_chat.engine.inference.kv.snapshots import SnapshotStore


def seq0_tokens(llm: llama_cpp.Llama) -> list[int]:
    """The tokens whose KV cells seq 0 holds (llama-cpp-python's record of them)."""
    return [int(t) for t in llm.input_ids[: llm.n_tokens]]


def save_seq0(llm: llama_cpp.Llama, store: SnapshotStore, key: SnapshotKey) -> None:
    """Put seq 0's conversation into the store (when it is long enough to be worth it)."""
    tokens = seq0_tokens(llm)
    if len(tokens) < store.MIN_TOKENS:
        return
    # cells beyond n_tokens are left over from an evaluation llama-cpp-python took back: not part of it
    if not trim_seq(llm.ctx, 0, len(tokens)):
        return
    state = seq_state(llm.ctx, 0)
    if state:
        store.put(key, tokens, state)


def restore_seq0(
    llm: llama_cpp.Llama, store: SnapshotStore, key: SnapshotKey, tokens: list[int], save_held: bool = True
) -> tuple[int, int]:
    """Before `tokens` are evaluated on seq 0: (reused, restored). When the store shares a longer
    prefix with them than seq 0 does, seq 0's conversation is saved (`save_held`), the snapshot put in
    its place up to the shared part, and llama-cpp-python told which tokens it holds; when seq 0's
    conversation is only cut back, it is saved first. A snapshot that cannot be used
    (damaged file, refused by llama.cpp) leaves seq 0 empty: the prompt is evaluated as usual."""
    held = seq0_tokens(llm)
    reused = common_prefix(held, tokens)
    limit = len(tokens) - 1  # llama.cpp must evaluate at least one token to get logits
    if held and reused == len(held):  # (the prompt goes on from all seq 0 holds: the usual next turn)
        return min(reused, limit), 0
    match = store.best(key, tokens)
    if match is None or min(match.shared, limit) <= min(reused, limit):
        if save_held and reused < len(held):  # seq 0's conversation is about to be cut back: keep it first
            save_seq0(llm, store, key)
        return min(reused, limit), 0
    if save_held:
        save_seq0(llm, store, key)
    keep = min(match.shared, limit)
    state = store.load(match)
    if state is None or not restore_seq(llm.ctx, 0, state, keep):
        clear_seq(llm.ctx, 0)
        llm.n_tokens = 0
        return 0, 0
    llm.input_ids[:keep] = tokens[:keep]
    llm.n_tokens = keep
    return keep, keep
