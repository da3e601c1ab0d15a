"""A chat message: the unit every backend, client and store speaks (no llama.cpp import here, so the
window, the CLI and the API server can use it without loading llama.cpp)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from ember_chat.engine.errors import InvalidParameter

ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class ImageInput:
    """An image attached to a user message: the file's bytes as attached (PNG, JPEG, WebP, GIF).
    `sha256` names it (the runtime caches an image's embedding by it)."""

    sha256: str
    data: bytes = field(repr=False)
    name: str = ""

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "") -> ImageInput:
        return cls(hashlib.sha256(data).hexdigest(), data, name)


@dataclass(frozen=True)
class AttachmentRef:
    """A stored text attachment of a user message (see engine/attachments): the engine's service
    expands it into the prompt (whole, or the passages retrieved for the question) on its thread."""

    attachment_id: int
    sha256: str
    name: str
    kind: str


@dataclass(frozen=True)
class ChatMessage:
    role: str
    content: str
    images: tuple[ImageInput, ...] = ()
    attachments: tuple[AttachmentRef, ...] = ()

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise InvalidParameter(f"message role must be one of {', '.join(ROLES)}, got {self.role!r}.")
        if self.images and self.role != "user":
            raise InvalidParameter("only a user message can carry images.")
