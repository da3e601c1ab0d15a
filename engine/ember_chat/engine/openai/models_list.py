"""`GET /models`, both ways: the answer Ember's API server writes (`models_answer`: the model it serves,
with its context length as vLLM's max_model_len), and another server's answer as Ember reads it
(`model_infos`: each model's id, its context length where the server says (vLLM's max_model_len, LM
Studio's context_length, llama.cpp's meta), and its owner)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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


def models_answer(served: str | None, n_ctx: int = 0) -> dict[str, Any]:
    """The list of Ember's API server: the model it serves as `served` (none while none is loaded)."""
    data = []
    if served is not None:
        data.append({"id": served, "object": "model", "created": 0, "owned_by": "ember", "max_model_len": n_ctx})
    return {"object": "list", "data": data}
