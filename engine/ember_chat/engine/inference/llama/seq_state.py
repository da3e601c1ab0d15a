"""One sequence's KV state in a llama.cpp context, saved as bytes and put back (llama.cpp's
llama_state_seq_* API as llama-cpp-python 0.3.36 binds it). Used for seq 0 (runtime) and the batch
decoder's slots alike."""

from __future__ import annotations

import ctypes

import llama_cpp


def seq_state(ctx: llama_cpp.llama_context_p, seq_id: int) -> bytes:
    """The sequence's cells (positions, K and V) as llama.cpp writes them; b"" when it holds none."""
    size = llama_cpp.llama_state_seq_get_size(ctx, seq_id)
    if size <= 0:
        return b""
    buf = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_seq_get_data(ctx, buf, size, seq_id)
    return bytes(memoryview(buf)[:written]) if written > 0 else b""


def clear_seq(ctx: llama_cpp.llama_context_p, seq_id: int) -> None:
    llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), seq_id, -1, -1)


def trim_seq(ctx: llama_cpp.llama_context_p, seq_id: int, keep: int) -> bool:
    """Drop the sequence's cells from position `keep` on; False when llama.cpp cannot (then the caller
    clears the sequence)."""
    return bool(llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), seq_id, keep, -1))


def restore_seq(ctx: llama_cpp.llama_context_p, seq_id: int, state: bytes, keep: int) -> bool:
    """Put `state` (from `seq_state`) into the sequence, keeping positions [0, keep) only. False when
    llama.cpp refused it (wrong size or layout, too few free cells) or could not trim it: the sequence
    is then empty."""
    if not state:
        return False
    data = ctypes.cast(ctypes.c_char_p(state), ctypes.POINTER(ctypes.c_uint8))
    try:
        read = llama_cpp.llama_state_seq_set_data(ctx, data, len(state), seq_id)
    except Exception:  # (llama.cpp reports a malformed state by return value; never let one escape)
        read = 0
    if read != len(state) or not trim_seq(ctx, seq_id, keep):
        clear_seq(ctx, seq_id)
        return False
    top = llama_cpp.llama_memory_seq_pos_max(llama_cpp.llama_get_memory(ctx), seq_id)
    if top != keep - 1:  # (the snapshot held fewer positions than it said it shares)
        clear_seq(ctx, seq_id)
        return False
    return True
