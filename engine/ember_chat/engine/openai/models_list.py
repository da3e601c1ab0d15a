"""A server's `GET /models` answer as Ember reads it: each model's id, its context length where the
server says (vLLM's max_model_len, LM Studio's context_length, llama.cpp's meta), and its owner."""

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
