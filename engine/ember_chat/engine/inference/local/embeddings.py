"""The local runtime's embeddings: each input's tokens (a text tokenized as llama-cpp-python's
`Llama.embed` tokenizes it: BOS when the model adds one, special tokens' text left as text; token ids
as given), checked, then the embeddings context's vectors (inference/llama/embeddings.py); a reranker's
query-document pairs joined as llama-server's /rerank joins them, then their scores."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ember_chat.engine.core.embeddings import BadEmbeddingInput, EmbeddingInput, Embeddings, Ranking
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


@dataclass(frozen=True)
class PairFormat:
    """How a reranker joins a query and a document, as llama-server's format_prompt_rerank: its GGUF's
    rerank template (`tokenizer.chat_template.rerank`, "{query}" and "{document}" in it, special tokens'
    text parsed) when it has one, else BOS query EOS SEP document EOS, each special token only where the
    vocabulary adds it (a BERT: [CLS] query [SEP] document; EOS is SEP where the vocabulary has no EOS)."""

    template: str | None
    bos: int | None
    eos: int | None
    sep: int | None


def pair_tokens(
    query: str, documents: Sequence[str], fmt: PairFormat, tokenize: Callable[[str, bool], list[int]], limit: int
) -> list[list[int]]:
    """Each document's tokens joined with the query's; `tokenize(text, special)` adds no BOS/EOS.
    BadEmbeddingInput naming documents[i] when its pair is longer than `limit` tokens."""
    out: list[list[int]] = []
    query_tokens = tokenize(query, False) if fmt.template is None else []
    for i, doc in enumerate(documents):
        if fmt.template is not None:
            tokens = tokenize(fmt.template.replace("{query}", query).replace("{document}", doc), True)
        else:
            tokens = [*_one(fmt.bos), *query_tokens, *_one(fmt.eos), *_one(fmt.sep), *tokenize(doc, False),
                      *_one(fmt.eos)]  # fmt: skip
        if len(tokens) > limit:
            raise BadEmbeddingInput(
                i,
                f"documents[{i}] is {len(tokens):,} tokens with the query; this model scores at most {limit:,} at "
                "once (its context or its batch size, whichever is smaller). Shorten it, or load the model with "
                "a larger context.",
            )
        out.append(tokens)
    return out


def _one(token: int | None) -> list[int]:
    return [] if token is None else [token]


def rank(embedder: Embedder, pairs: Sequence[Sequence[int]], stopped: Callable[[], bool] = lambda: False) -> Ranking:
    """The scores of these pairs (`pair_tokens`); JobCancelled once `stopped()` between two decodes."""
    return Ranking(embedder.score(pairs, stopped), sum(len(t) for t in pairs))
