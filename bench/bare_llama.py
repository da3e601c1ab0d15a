"""The bare llama-cpp-python loop the benchmarks compare Ember against: one `llama_decode` of the
prompt, then greedy-sample and decode one token at a time — nothing else."""

from __future__ import annotations

import time

import llama_cpp


def bare_loop(llm: llama_cpp.Llama, prompt: list[int], n: int, stop_at_eog: bool = True) -> tuple[int, list[int]]:
    """(start ns, the time each of up to `n` tokens was sampled), from an empty KV cache.
    `stop_at_eog=False`: exactly n tokens, as llama-bench generates them."""
    ctx = llm.ctx
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
    sampler = llama_cpp.llama_sampler_init_greedy()
    times: list[int] = []
    try:
        t0 = time.perf_counter_ns()
        arr = (llama_cpp.llama_token * len(prompt))(*prompt)
        if llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(arr, len(prompt))) != 0:
            raise RuntimeError("decode failed")
        one = (llama_cpp.llama_token * 1)()
        while True:
            tok = llama_cpp.llama_sampler_sample(sampler, ctx, -1)
            times.append(time.perf_counter_ns())
            if len(times) == n or (stop_at_eog and llama_cpp.llama_vocab_is_eog(vocab, tok)):
                break
            one[0] = tok
            if llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(one, 1)) != 0:
                raise RuntimeError("decode failed")
    finally:
        llama_cpp.llama_sampler_free(sampler)
    return t0, times
