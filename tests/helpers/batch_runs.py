"""Runs of the batch decoder driven as BatchSource drives them, for the speculation tests."""

from __future__ import annotations

import llama_cpp

from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.inference.llama.batch_decode import BatchDecoder, SlotRun


def batch_tokens(
    dec: BatchDecoder, prompts: list[list[int]], params: SamplingParams, n: int
) -> tuple[list[list[int]], list[SlotRun]]:
    """Each prompt's first `n` tokens from runs started together, as BatchSource takes them: a token, then
    `accept`, stepping only when no run has a token to give (a verified draft gives several per step)."""
    runs = [dec.start(p, params, 0) for p in prompts]
    outs: list[list[int]] = [[] for _ in runs]
    while not all(r.finished for r in runs):
        if all(r.finished or r.token is None for r in runs):
            dec.step()
        for run, out in zip(runs, outs, strict=True):
            if run.finished or run.token is None:
                continue
            out.append(run.token)
            if len(out) == n:
                dec.finish(run)
            else:
                dec.accept(run, run.token)
    memory = llama_cpp.llama_get_memory(dec.llm.ctx)
    for run in runs:  # the slot's record is what its cells hold
        assert llama_cpp.llama_memory_seq_pos_max(memory, run.slot.seq_id) == len(run.slot.cached) - 1
    return outs, runs
