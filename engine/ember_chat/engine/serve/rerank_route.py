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

from typing import Any

from ember_chat.engine.core.embeddings import Ranking
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.openai.chat_request import CLI_UNKNOWN_FIELDS_ADVICE
from ember_chat.engine.serve.embeddings_route import MAX_INPUTS, Serving, engine_errors, read_body
from ember_chat.engine.serve.model_routing import Served

KNOWN = {"model", "query", "documents", "top_n", "return_documents"}


def read_documents(raw: Any) -> list[str]:
    """`documents`: texts, or objects with a `text` (Cohere's and Jina's); a 400 naming the field or
    `documents[i]` for anything else."""
    if not isinstance(raw, list) or not raw:
        what = "an empty array" if raw == [] else "missing" if raw is None else f"a {type(raw).__name__}"
        raise ApiError(400, f"documents must be a non-empty array of strings (not {what}).", param="documents")
    if len(raw) > MAX_INPUTS:
        raise ApiError(400, f"documents has {len(raw):,} items; at most {MAX_INPUTS:,} are scored at once.",
                       param="documents")  # fmt: skip
    out: list[str] = []
    for i, doc in enumerate(raw):
        text = doc.get("text") if isinstance(doc, dict) else doc
        if not isinstance(text, str):
            raise ApiError(400, f'documents[{i}] must be a string or an object with a "text" string.',
                           param="documents")  # fmt: skip
        out.append(text)
    return out


def _top_n(raw: Any, count: int) -> int:
    if raw is None:
        return count
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 1:
        raise ApiError(400, "top_n must be a positive whole number.", param="top_n")
    return min(raw, count)


def rerank(
    body: Any, serving: Serving, allow_unknown: bool = False, advice: str = CLI_UNKNOWN_FIELDS_ADVICE
) -> dict[str, Any]:
    """Answer one rerank request (the response body, or an ApiError)."""
    body, requested, ttl = read_body(body, KNOWN, allow_unknown, advice)
    query = body.get("query")
    if not isinstance(query, str):
        raise ApiError(400, "query must be a string.", param="query")
    documents = read_documents(body.get("documents"))
    top_n = _top_n(body.get("top_n"), len(documents))
    return_documents = body.get("return_documents", False)
    if not isinstance(return_documents, bool):
        raise ApiError(400, "return_documents must be true or false.", param="return_documents")
    with serving(requested, ttl) as served:
        ranking = _rank(served, query, documents)
    order = sorted(range(len(documents)), key=lambda i: -ranking.scores[i])[:top_n]  # (stable: ties by index)
    results: list[dict[str, Any]] = []
    for i in order:
        result: dict[str, Any] = {"index": i, "relevance_score": ranking.scores[i]}
        if return_documents:
            result["document"] = {"text": documents[i]}
        results.append(result)
    usage = {"prompt_tokens": ranking.prompt_tokens, "total_tokens": ranking.prompt_tokens}
    return {"model": served.name, "object": "list", "results": results, "usage": usage}


def _rank(served: Served, query: str, documents: list[str]) -> Ranking:
    model = served.service.model
    if model is not None and model.kind != "reranker":
        raise ApiError(400, f"{served.name} is not a reranker: it has no relevance scores. Name a reranker model "
                       "(a GGUF with rank pooling, such as bge-reranker).", param="model",
                       code="model_not_reranker")  # fmt: skip
    with engine_errors("documents"):
        ranking = served.service.rerank(query, documents)
    return ranking
