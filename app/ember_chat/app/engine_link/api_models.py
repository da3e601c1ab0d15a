"""The models the local API server loaded for requests (its model pool's rows), as the window words them:
the Local API server dialog and the Model Manager say them alike. `ApiModels` is what the Model Manager
and the model bar ask of the server's control (server/api_control.py; the shell hands it to them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from PySide6.QtCore import SignalInstance

from ember_chat.engine.inference.pool.pool import ModelState


class ApiModels(Protocol):
    """The local API server's models loaded for requests: read (the rows come on the GUI thread; every
    view asks on `pool_changed`, and again while it shows idle times) and unloaded."""

    @property
    def pool_changed(self) -> SignalInstance: ...  # Signal(): the models loaded for requests changed

    def read_pool(self, shown: Callable[[list[ModelState]], None]) -> None: ...

    def unload_api_model(self, name: str, refused: Callable[[str], None]) -> None: ...


def idle_text(row: ModelState) -> str:
    """How long a model loaded for requests has been idle, as the table says it."""
    if row.state == "loading":
        return "loading"
    if row.busy or row.idle_s is None:
        return "answering"
    seconds = round(row.idle_s)
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min"
