"""What the chat list drives besides its own widgets, as much as it needs of each: the chat the window
shows (the conversation's controller, one layer up: the chat list may not import it) and the side
panel's parameters a chat opened brings back. The shell's composition hands over the real ones."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ember_chat.engine.core.params import SamplingParams


class ShownChat(Protocol):
    """The chat on screen: which one (None: a new chat), whether an answer streams into it, what is done
    once that answer stopped, and its thread shown again or another chat opened."""

    conversation_id: int | None

    @property
    def generating(self) -> bool: ...

    def after_stop(self, action: Callable[[], None]) -> None: ...

    def refresh(self, jump_to: int | None = None) -> None: ...

    def open_conversation(self, conversation_id: int | None, jump_to: int | None = None) -> None: ...


class ChatParams(Protocol):
    """The side panel's parameters: a chat opened shows its saved ones (the panel's own where it saved none)."""

    def params(self) -> SamplingParams: ...

    def set_params(self, p: SamplingParams, system_prompt: str, context: int) -> None: ...
