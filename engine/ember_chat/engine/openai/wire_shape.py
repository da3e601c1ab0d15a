"""Response bodies as typed models (pydantic): what a route answers is declared as a `Shape` (the `openai`
and `anthropic` packages' own types are the reference), built by the route's builder and written with
`dump()`.

One rule says which keys a body carries: a field without a default is always written (`None` as null,
where its type allows it: `"logprobs": null`, as OpenAI's own responses carry it), a field with a default
only when the builder set it (rerank's `document` without `return_documents`, a usage's details). So

    class RerankResult(Shape):
        index: int
        relevance_score: float
        document: RerankDocument | None = None  # only with return_documents

    RerankResult(index=0, relevance_score=1.5).dump() == {"index": 0, "relevance_score": 1.5}

A shape declares every key its body may have (`extra="forbid"`): a builder that writes a key the shape
does not know fails in the tests, not in a client. Values are checked as Python types (a float field takes
an int), not re-validated when dumped."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Shape(BaseModel):
    """A response body, or an object inside one."""

    model_config = ConfigDict(extra="forbid")

    def dump(self) -> dict[str, Any]:
        """The body as plain values (dicts, lists, numbers, strings, None) for json.dumps: the keys the rule
        above says, in their declared order. (Python's values, not pydantic's JSON ones: a float stays a
        float, as the server wrote it before, infinity included.)"""
        return self.model_dump(exclude_unset=True)
