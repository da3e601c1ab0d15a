"""POST /v1/rerank (also /rerank and /v1/reranking, as llama-server names it) on Ember's server: a
reranker's relevance of each document to a query, for the model a request names (or the server's own):

    {"query": str, "documents": [str | {"text": str}, …], "model"?, "top_n"?, "return_documents"?: bool}
    → {"model", "object": "list", "results": [{"index", "relevance_score", "document"?: {"text"}}, …],
       "usage": {"prompt_tokens", "total_tokens"}}

The results are sorted by score, highest first, and cut to top_n. A score is the reranker's own output
for the query and the document joined as llama-server joins them (its GGUF's rerank template, else BOS
query EOS SEP document EOS: inference/local/embeddings.pair_tokens), unnormalised as llama-server gives
it. The work runs on the model's engine thread in its embeddings context, stopped between two decodes
when the job is cancelled. A model that is not a reranker (rank pooling) is a 400 naming it; a pair
longer than the model takes is a 400 naming its document (documents[3])."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ember_chat.engine.core.embeddings import Ranking
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.openai.chat_request import CLI_UNKNOWN_FIELDS_ADVICE
from ember_chat.engine.openai.typed_body import Body, Must, Nested, read_body
from ember_chat.engine.openai.vector_shapes import EmbeddingUsage, RerankDocument, RerankList, RerankResult
from ember_chat.engine.serve.embeddings_route import MAX_INPUTS, Serving, engine_errors
from ember_chat.engine.serve.model_routing import Served, take_ttl


class Document(Nested):
    """A document as Cohere and Jina send it (their other fields ignored)."""

    text: str


class RerankBody(Body):
    model: str | None = None  # (first: a model that is not a string was refused before the rest was read)
    query: str
    # texts, or objects with a `text` (Cohere's and Jina's)
    documents: Annotated[
        list[Annotated[str | Document, Must('a string or an object with a "text" string')]],
        Field(min_length=1),
        Must("a non-empty array of strings"),
    ]
    top_n: Annotated[int | None, Field(ge=1), Must("a positive whole number")] = None
    return_documents: bool = False


def rerank(
    body: object, serving: Serving, allow_unknown: bool = False, advice: str = CLI_UNKNOWN_FIELDS_ADVICE
) -> dict[str, Any]:
    """Answer one rerank request (the response body, or an ApiError)."""
    ttl = take_ttl(body)  # (how long a model loaded for it stays: not a field of the request itself)
    request = read_body(RerankBody, body, allow_unknown, advice)
    if len(request.documents) > MAX_INPUTS:
        raise ApiError(400, f"documents has {len(request.documents):,} items; at most {MAX_INPUTS:,} are scored at "
                       "once.", param="documents")  # fmt: skip
    documents = [doc if isinstance(doc, str) else doc.text for doc in request.documents]
    top_n = min(request.top_n or len(documents), len(documents))
    with serving(request.model, ttl) as served:
        ranking = _rank(served, request.query, documents)
    order = sorted(range(len(documents)), key=lambda i: -ranking.scores[i])[:top_n]  # (stable: ties by index)
    results = [
        RerankResult(index=i, relevance_score=ranking.scores[i], document=RerankDocument(text=documents[i]))
        if request.return_documents
        else RerankResult(index=i, relevance_score=ranking.scores[i])
        for i in order
    ]
    usage = EmbeddingUsage(prompt_tokens=ranking.prompt_tokens, total_tokens=ranking.prompt_tokens)
    return RerankList(model=served.name, object="list", results=results, usage=usage).dump()


def _rank(served: Served, query: str, documents: list[str]) -> Ranking:
    model = served.service.model
    if model is not None and model.kind != "reranker":
        raise ApiError(400, f"{served.name} is not a reranker: it has no relevance scores. Name a reranker model "
                       "(a GGUF with rank pooling, such as bge-reranker).", param="model",
                       code="model_not_reranker")  # fmt: skip
    with engine_errors("documents"):
        ranking = served.service.rerank(query, documents)
    return ranking
