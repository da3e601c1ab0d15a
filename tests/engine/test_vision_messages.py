"""Issue 17: a chat message carries images; a backend that cannot see them says so."""

from __future__ import annotations

import hashlib

import pytest

from ember_chat.engine.core.messages import ChatMessage, ImageInput
from ember_chat.engine.errors import EmberError, ImagesNotSupported, InvalidParameter


def test_a_message_carries_images_compared_by_value() -> None:
    data = b"\x89PNG\r\n\x1a\nfake"
    img = ImageInput.from_bytes(data, "shot.png")
    assert img.sha256 == hashlib.sha256(data).hexdigest()
    a = ChatMessage("user", "what is this?", images=(img,))
    b = ChatMessage("user", "what is this?", images=(ImageInput.from_bytes(data, "shot.png"),))
    assert a == b and hash(a) == hash(b)
    assert a != ChatMessage("user", "what is this?")
    assert ChatMessage("user", "hi").images == ()


def test_images_only_on_user_messages() -> None:
    img = ImageInput.from_bytes(b"x", "x.png")
    with pytest.raises(InvalidParameter):
        ChatMessage("assistant", "no", images=(img,))


def test_images_not_supported_is_an_ember_error() -> None:
    assert issubclass(ImagesNotSupported, EmberError)
