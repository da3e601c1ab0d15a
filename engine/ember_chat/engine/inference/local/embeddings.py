"""The local runtime's embeddings: each input's tokens (a text tokenized as llama-cpp-python's
`Llama.embed` tokenizes it: BOS when the model adds one, special tokens' text left as text; token ids
as given), checked, then the embeddings context's vectors (inference/llama/embeddings.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ember_chat.engine.core.embeddings import BadEmbeddingInput, EmbeddingInput, Embeddings
from ember_chat.engine.inference.llama.embeddings import POOLING_NAMES, Embedder


def input_tokens(
    inputs: Sequence[EmbeddingInput], tokenize: Callable[[str], list[int]], n_vocab: int, limit: int
) -> list[Sequence[int]]:
    """Each input's tokens; BadEmbeddingInput naming the first that is empty, holds a token outside the
    vocabulary or is longer than `limit` tokens."""
    out: list[Sequence[int]] = []
    for i, item in enumerate(inputs):
        tokens: Sequence[int] = tokenize(item) if isinstance(item, str) else item
        if not tokens:
            raise BadEmbeddingInput(i, f"input[{i}] is empty: there is nothing to embed.")
        bad = next((t for t in tokens if not 0 <= t < n_vocab), None)
        if bad is not None:
            raise BadEmbeddingInput(
                i, f"input[{i}] has the token id {bad}, outside the model's vocabulary of {n_vocab:,}."
            )
        if len(tokens) > limit:
            raise BadEmbeddingInput(
                i,
                f"input[{i}] is {len(tokens):,} tokens; this model embeds at most {limit:,} at once (its context "
                "or its batch size, whichever is smaller). Split it, or load the model with a larger batch size.",
            )
        out.append(tokens)
    return out


def embed(
    embedder: Embedder, tokens: Sequence[Sequence[int]], stopped: Callable[[], bool] = lambda: False
) -> Embeddings:
    """The vectors of these inputs' tokens (checked by `input_tokens`); JobCancelled once `stopped()`."""
    vectors = embedder.embed(tokens, stopped)
    return Embeddings(vectors, sum(len(t) for t in tokens), POOLING_NAMES.get(embedder.pooling, "mean"))
