"""Embeddings from a loaded llama.cpp model, in a context of their own (`Embedder`).

The generation's context keeps its KV cells, slots and snapshots untouched: embeddings are computed in
a second llama.cpp context on the same loaded weights, made in embeddings mode on first use and freed
with the model. Its pooling is the model's own (`<arch>.pooling_type`: mean, cls, last), or mean for a
model without one (a chat model: its tokens' hidden states averaged), as llama-cpp-python's
`Llama(embedding=True, pooling_type=MEAN).embed` computes it; the vectors are L2-normalised. A reranker
(rank pooling) gives no vectors but a score per input (`score`: its classification head's first output,
as llama-server's /rerank answers it). Several
inputs go into one `llama_decode`, each its own sequence, as long as their tokens fit the batch. Used
by one thread at a time (the engine thread), like the runtime that owns it.

llama.cpp's kernels are not batch-invariant: an input embedded together with others may differ a little
from the same input alone (up to 7e-3 in a component on SmolLM2 135M); llama-cpp-python's `embed` gives
the same numbers as this for the same inputs in the same order (measured: equal to 1e-15)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import llama_cpp

from ember_chat.engine.errors import GenerationError, InvalidParameter, JobCancelled

# llama.cpp's pooling types as the API can say them (the GGUF's `<arch>.pooling_type` values)
POOLING_NAMES = {
    llama_cpp.LLAMA_POOLING_TYPE_NONE: "none",
    llama_cpp.LLAMA_POOLING_TYPE_MEAN: "mean",
    llama_cpp.LLAMA_POOLING_TYPE_CLS: "cls",
    llama_cpp.LLAMA_POOLING_TYPE_LAST: "last",
    llama_cpp.LLAMA_POOLING_TYPE_RANK: "rank",
}
MAX_SEQUENCES = 64  # inputs decoded together at most (each is one sequence of the context)


def model_pooling(metadata: dict[str, str]) -> int:
    """The pooling the model's GGUF asks for (`<arch>.pooling_type`), mean when it has none or says none:
    a chat model embeds by averaging its tokens' hidden states."""
    arch = metadata.get("general.architecture", "")
    try:
        pooling = int(metadata.get(f"{arch}.pooling_type", llama_cpp.LLAMA_POOLING_TYPE_NONE))
    except ValueError:
        pooling = llama_cpp.LLAMA_POOLING_TYPE_NONE
    if pooling in (llama_cpp.LLAMA_POOLING_TYPE_NONE, llama_cpp.LLAMA_POOLING_TYPE_UNSPECIFIED):
        return llama_cpp.LLAMA_POOLING_TYPE_MEAN
    return pooling


def normalized(vector: Sequence[float]) -> list[float]:
    """`vector` scaled to unit length (L2); a zero vector stays zero (as llama-cpp-python's)."""
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm > 0 else list(vector)


class Embedder:
    """An embeddings-mode context on `llm`'s model: `n_ctx` tokens (the longest input), `threads` as the
    generation's. `close()` frees it (before the model is)."""

    def __init__(self, llm: llama_cpp.Llama, n_ctx: int, threads: int, threads_batch: int) -> None:
        pooling = model_pooling(llm.metadata)
        self.pooling = pooling
        self.n_embd = int(llama_cpp.llama_model_n_embd(llm.model))
        # a pooled output's values: a vector, or a reranker's classifier outputs (its score first)
        rank = pooling == llama_cpp.LLAMA_POOLING_TYPE_RANK
        self._size = max(1, int(llama_cpp.llama_model_n_cls_out(llm.model))) if rank else self.n_embd
        self.n_ctx = n_ctx
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx
        # a non-causal model (bert) sees each sequence whole in one ubatch: batch = ubatch = the context
        params.n_batch = params.n_ubatch = n_ctx
        params.n_seq_max = min(MAX_SEQUENCES, n_ctx, llama_cpp.llama_max_parallel_sequences())
        params.kv_unified = True  # (the sequences share the cells: any mix of lengths that fits n_ctx)
        params.n_threads, params.n_threads_batch = threads, threads_batch
        params.embeddings = True
        params.pooling_type = pooling
        params.no_perf = True
        params.flash_attn_type = llm.context_params.flash_attn_type  # (as the generation: Ember's setting)
        self.n_seq_max = int(params.n_seq_max)
        self._model = llm.model  # (kept alive by the Llama that owns it, which outlives this context)
        self._ctx: llama_cpp.llama_context_p | None = llama_cpp.llama_init_from_model(llm.model, params)
        if not self._ctx:
            self._ctx = None
            raise GenerationError(f"llama.cpp could not create a {n_ctx}-token embeddings context (out of memory?).")
        self._batch: llama_cpp.llama_batch | None = llama_cpp.llama_batch_init(n_ctx, 0, self.n_seq_max)

    def embed(self, inputs: Sequence[Sequence[int]], stopped: Callable[[], bool] = lambda: False) -> list[list[float]]:
        """Each input's normalised vector, in order; every input is non-empty and at most `n_ctx` tokens
        (the caller checks, naming the input). JobCancelled when `stopped()` between two decodes (a request
        of thousands of inputs ends with its engine, not after it)."""
        if self.pooling == llama_cpp.LLAMA_POOLING_TYPE_RANK:
            raise InvalidParameter("This model is a reranker (rank pooling): it scores pairs, it has no embeddings.")
        return [normalized(v) for v in self._run(inputs, stopped)]

    def score(self, inputs: Sequence[Sequence[int]], stopped: Callable[[], bool] = lambda: False) -> list[float]:
        """A reranker's score of each input (a query and a document joined as one sequence): the first
        value of its rank-pooled output, unnormalised, as llama-server's /rerank gives it. Inputs checked
        and stopped as for `embed`; InvalidParameter for a model that does not pool by rank."""
        if self.pooling != llama_cpp.LLAMA_POOLING_TYPE_RANK:
            raise InvalidParameter("This model is not a reranker (its pooling is not rank): it has no scores.")
        return [v[0] for v in self._run(inputs, stopped)]

    def _run(self, inputs: Sequence[Sequence[int]], stopped: Callable[[], bool]) -> list[list[float]]:
        """Each input's pooled output, in as few decodes as the context allows."""
        out: list[list[float]] = []
        group: list[Sequence[int]] = []
        used = 0
        for tokens in inputs:
            if group and (used + len(tokens) > self.n_ctx or len(group) >= self.n_seq_max):
                if stopped():
                    raise JobCancelled("The embeddings were stopped.")
                out += self._decode(group)
                group, used = [], 0
            group.append(tokens)
            used += len(tokens)
        if group:
            out += self._decode(group)
        return out

    def _decode(self, group: list[Sequence[int]]) -> list[list[float]]:
        """One llama_decode of these inputs, each its own sequence, every token an output (llama.cpp pools
        the outputs of a sequence; an input token not marked as one is overridden with a warning)."""
        ctx, batch = self._ctx, self._batch
        assert ctx is not None and batch is not None
        memory = llama_cpp.llama_get_memory(ctx)
        if memory:  # (a non-causal model has no KV memory)
            llama_cpp.llama_memory_clear(memory, True)
        n = 0
        for seq, tokens in enumerate(group):
            for pos, token in enumerate(tokens):
                batch.token[n], batch.pos[n] = token, pos
                batch.n_seq_id[n], batch.seq_id[n][0] = 1, seq
                batch.logits[n] = True
                n += 1
        batch.n_tokens = n
        code = llama_cpp.llama_decode(ctx, batch)
        if code != 0:
            raise GenerationError(f"llama.cpp could not compute the embeddings (llama_decode returned {code}).")
        vectors = []
        for seq in range(len(group)):
            ptr = llama_cpp.llama_get_embeddings_seq(ctx, seq)
            if not ptr:
                raise GenerationError("llama.cpp gave no pooled embedding for an input.")
            vectors.append(ptr[: self._size])
        return vectors

    def close(self) -> None:
        batch, self._batch = self._batch, None
        if batch is not None:
            llama_cpp.llama_batch_free(batch)
        ctx, self._ctx = self._ctx, None
        if ctx is not None:
            llama_cpp.llama_free(ctx)
