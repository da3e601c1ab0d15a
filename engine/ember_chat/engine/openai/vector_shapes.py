"""The bodies of /v1/embeddings (OpenAI's `CreateEmbeddingResponse`) and /v1/rerank (llama-server's and
Jina's), as typed shapes (openai/wire_shape.py)."""

from __future__ import annotations

from typing import Literal

from ember_chat.engine.openai.wire_shape import Shape


class EmbeddingUsage(Shape):
    prompt_tokens: int
    total_tokens: int


class Embedding(Shape):
    object: Literal["embedding"]
    index: int
    embedding: list[float] | str  # floats, or base64 (little-endian float32)


class EmbeddingList(Shape):
    object: Literal["list"]
    data: list[Embedding]
    model: str
    usage: EmbeddingUsage


class RerankDocument(Shape):
    text: str


class RerankResult(Shape):
    index: int
    relevance_score: float
    document: RerankDocument | None = None  # (with return_documents)


class RerankList(Shape):
    model: str
    object: Literal["list"]
    results: list[RerankResult]
    usage: EmbeddingUsage
