"""A chat message: the unit every backend, client and store speaks (no llama.cpp import here, so the
window, the CLI and the API server can use it without loading llama.cpp)."""

from __future__ import annotations

from dataclasses import dataclass

from ember_chat.engine.errors import InvalidParameter

ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class ChatMessage:
    role: str
    content: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise InvalidParameter(f"message role must be one of {', '.join(ROLES)}, got {self.role!r}.")
