"""A chat message: the unit every backend, client and store speaks (no llama.cpp import here, so the
window, the CLI and the API server can use it without loading llama.cpp)."""

from __future__ import annotations

import codecs
import hashlib
from dataclasses import dataclass, field

from ember_chat.engine.core.tools import ToolCall, ToolResult
from ember_chat.engine.errors import InvalidParameter

ROLES = ("system", "user", "assistant", "tool")


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
    tool_calls: tuple[ToolCall, ...] = ()  # an assistant's calls (its content is what it said besides)
    tool_call_id: str | None = None  # a tool message: the call it answers
    # An answer being continued that stopped inside a UTF-8 character (max tokens, Stop): that
    # character's first bytes, which its `content` leaves out. The local runtime puts them at the end
    # of the prompt, so the continuation completes the character instead of writing it again.
    held_bytes: bytes = b""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise InvalidParameter(f"message role must be one of {', '.join(ROLES)}, got {self.role!r}.")
        if self.images and self.role != "user":
            raise InvalidParameter("only a user message can carry images.")
        if self.tool_calls and self.role != "assistant":
            raise InvalidParameter("only an assistant message can carry tool calls.")
        if self.tool_call_id is not None and self.role != "tool":
            raise InvalidParameter("only a tool message answers a tool call.")
        if self.held_bytes and (self.role != "assistant" or not is_unfinished_utf8(self.held_bytes)):
            raise InvalidParameter("only an answer can end inside a character, with 1 to 3 of its first bytes.")

    @classmethod
    def from_tool_result(cls, result: ToolResult) -> ChatMessage:
        """The `tool` message that gives a call's result (or its error) back to the model."""
        return cls("tool", result.content, tool_call_id=result.call_id)


def is_unfinished_utf8(data: bytes) -> bool:
    """`data` is the start of one UTF-8 character, not all of it (what an answer cut mid-character holds)."""
    if not data:
        return False
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        return decoder.decode(data) == "" and decoder.getstate()[0] == data
    except UnicodeDecodeError:
        return False
