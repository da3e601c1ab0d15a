"""An embeddings request's inputs and its answer: each input (a text, or token ids as they are) becomes
one unit-length vector of the model's (OpenAI's /v1/embeddings, RAG tools' indexes)."""

from __future__ import annotations

from dataclasses import dataclass

from ember_chat.engine.errors import InvalidParameter

EmbeddingInput = str | tuple[int, ...]  # a text (tokenized by the model) or its token ids


@dataclass(frozen=True)
class Embeddings:
    vectors: list[list[float]]  # one per input, in order, L2-normalised
    prompt_tokens: int  # the tokens of every input together
    pooling: str  # how a vector was made from its tokens' states: mean, cls or last


@dataclass(frozen=True)
class Ranking:
    """A reranker's scores of documents against a query (llama-server's /rerank)."""

    scores: list[float]  # one per document, in the documents' order (higher: more relevant)
    prompt_tokens: int  # the tokens of every query-document pair together


class BadEmbeddingInput(InvalidParameter):
    """One input cannot be embedded (empty, longer than the model takes, a token outside the vocabulary):
    `index` says which, as the API names it (input[3]; documents[3] for a reranker's pairs)."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index
