"""The models the local API server loaded for requests (its model pool's rows), as the window words them:
the Local API server dialog and the Model Manager say them alike."""

from __future__ import annotations

from ember_chat.engine.inference.pool.pool import ModelState


def idle_text(row: ModelState) -> str:
    """How long a model loaded for requests has been idle, as the table says it."""
    if row.state == "loading":
        return "loading"
    if row.busy or row.idle_s is None:
        return "answering"
    seconds = round(row.idle_s)
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min"
