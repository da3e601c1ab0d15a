"""Response bodies as typed shapes (openai/wire_shape.py): which keys a body carries (a field without a
default always, None as null; one with a default only when set), a key a shape does not declare refused,
and the bodies of the smaller routes read by the official client's own types with nothing left over."""

from __future__ import annotations

import openai.types
import pydantic
import pytest

from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.openai.models_list import ModelList, model_card, models_answer
from ember_chat.engine.openai.vector_shapes import (
    Embedding,
    EmbeddingList,
    EmbeddingUsage,
    RerankDocument,
    RerankList,
    RerankResult,
)


def test_a_field_with_a_default_is_written_only_when_set_and_none_is_null_where_it_is_required() -> None:
    usage = EmbeddingUsage(prompt_tokens=3, total_tokens=3)
    bare = RerankList(model="r", object="list", results=[RerankResult(index=1, relevance_score=2.5)], usage=usage)
    assert bare.dump()["results"] == [{"index": 1, "relevance_score": 2.5}]
    with_text = RerankResult(index=0, relevance_score=-1.0, document=RerankDocument(text="a"))
    assert with_text.dump() == {"index": 0, "relevance_score": -1.0, "document": {"text": "a"}}
    assert ApiError(400, "no", param=None).body() == {
        "error": {"message": "no", "type": "invalid_request_error", "param": None, "code": None}
    }


def test_a_key_the_shape_does_not_declare_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match="extra"):
        RerankResult(index=0, relevance_score=1.0, score=1.0)  # type: ignore[call-arg]
    with pytest.raises(pydantic.ValidationError):
        model_card("m", context_length=512)


def test_the_official_client_reads_the_bodies_with_nothing_left_over() -> None:
    body = EmbeddingList(
        object="list",
        data=[Embedding(object="embedding", index=0, embedding=[0.5, -0.5])],
        model="m",
        usage=EmbeddingUsage(prompt_tokens=2, total_tokens=2),
    ).dump()
    read = openai.types.CreateEmbeddingResponse.model_validate(body)
    assert read.data[0].embedding == [0.5, -0.5] and not read.model_extra
    page = models_answer("m", 2048)
    model = openai.types.Model.model_validate(page["data"][0])
    assert model.id == "m" and model.model_extra == {"max_model_len": 2048}  # (vLLM's, on purpose)
    assert ModelList.model_validate(page).dump() == page
