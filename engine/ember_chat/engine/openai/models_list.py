"""`GET /models`, both ways: the answer Ember's API server writes (`models_answer`: the model it serves,
with its context length as vLLM's max_model_len), and another server's answer as Ember reads it
(`model_infos`: each model's id, its context length where the server says (vLLM's max_model_len, LM
Studio's context_length, llama.cpp's meta), and its owner)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ember_chat.engine.openai.wire_shape import Shape


@dataclass(frozen=True)
class RemoteModelInfo:
    id: str
    n_ctx: int | None
    owned_by: str | None


def model_infos(data: Any) -> list[RemoteModelInfo]:
    items = data.get("data") if isinstance(data, dict) else data
    out = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            continue
        meta = item.get("meta") if isinstance(item.get("meta"), dict) else {}
        n_ctx = item.get("max_model_len") or item.get("context_length") or meta.get("n_ctx") or meta.get("n_ctx_train")
        out.append(RemoteModelInfo(item["id"], n_ctx if isinstance(n_ctx, int) else None, item.get("owned_by")))
    return out


class ModelCard(Shape):
    """A model in the list (OpenAI's `Model`, with vLLM's max_model_len; with a model pool, its state)."""

    id: str
    object: Literal["model"]
    created: int
    owned_by: str
    max_model_len: int | None = None  # (its context, where known)
    state: str | None = None  # loaded, loading, not loaded (a server with a model pool)
    memory_bytes: int | None = None
    connection: str | None = None  # a remote model's connection


class ModelList(Shape):
    object: Literal["list"]
    data: list[ModelCard]


def model_card(name: str, **more: Any) -> ModelCard:
    """A model of Ember's server (created 0, owned by ember), with what more there is to say of it."""
    return ModelCard(id=name, object="model", created=0, owned_by="ember", **more)


def models_answer(served: str | None, n_ctx: int = 0) -> dict[str, Any]:
    """The list of Ember's API server: the model it serves as `served` (none while none is loaded)."""
    data = [model_card(served, max_model_len=n_ctx)] if served is not None else []
    return ModelList(object="list", data=data).dump()
