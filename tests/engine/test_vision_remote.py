"""Issue 17: a remote OpenAI-compatible server gets a message's images as `image_url` parts with a
data: URL (against the tests' fault-injecting server, which records what it received); a server
that refuses them says why, and it is not retried."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from ember_chat.engine.core.images import from_data_url, to_data_url
from ember_chat.engine.core.messages import ChatMessage, ImageInput
from ember_chat.engine.errors import ImagesNotSupported, InvalidParameter, RemoteServerError
from tests.helpers.remote_support import PARAMS, Backends, drain
from tests.helpers.sse_server import FakeOpenAI

pytestmark = pytest.mark.usefixtures("no_thread_left")


def png(color: tuple[int, int, int]) -> ImageInput:
    buf = io.BytesIO()
    Image.new("RGB", (8, 6), color).save(buf, "PNG")
    return ImageInput.from_bytes(buf.getvalue(), "shot.png")


def test_images_go_as_image_url_parts_with_data_urls(server: FakeOpenAI, backends: Backends) -> None:
    backend = backends.make(server)
    red, blue = png((255, 0, 0)), png((0, 0, 255))
    messages = [
        ChatMessage("user", "what is this?", images=(red,)),
        ChatMessage("assistant", "A red square."),
        ChatMessage("user", "and this?", images=(blue,)),
    ]
    _, done = drain(backend.chat(messages, PARAMS))
    assert done.text == "Hello world"
    [request] = server.generate_requests()
    sent = request.body["messages"]
    assert sent[1] == {"role": "assistant", "content": "A red square."}  # text stays a plain string
    for message, image, text in ((sent[0], red, "what is this?"), (sent[2], blue, "and this?")):
        assert message["role"] == "user"
        parts = message["content"]
        assert [p["type"] for p in parts] == ["image_url", "text"]
        url = parts[0]["image_url"]["url"]
        assert url.startswith("data:image/png;base64,")
        assert base64.b64decode(url.split(",", 1)[1]) == image.data
        assert parts[1] == {"type": "text", "text": text}


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (
            500,
            {
                "error": {
                    "code": 500,
                    "message": "image input is not supported - hint: you may need to provide the mmproj",
                }
            },
        ),
        (400, {"object": "error", "message": "qwen2.5 is not a multimodal model", "type": "BadRequestError"}),
    ],
)
def test_a_server_that_refuses_images_says_why_and_is_not_retried(
    server: FakeOpenAI, backends: Backends, status: int, body: dict
) -> None:
    backend = backends.make(server)
    server.fail(status, body, times=3)
    with pytest.raises(ImagesNotSupported) as info:
        list(backend.chat([ChatMessage("user", "look", images=(png((1, 2, 3)),))], PARAMS))
    message = str(info.value)
    assert "lab" in message and "image" in message.lower()
    assert ("mmproj" in message) if status == 500 else ("not a multimodal model" in message)
    assert len(server.generate_requests()) == 1


def test_an_unrelated_error_with_images_stays_a_server_error(server: FakeOpenAI, backends: Backends) -> None:
    backend = backends.make(server)
    server.fail(400, {"error": {"message": "max_tokens is too large"}})
    with pytest.raises(RemoteServerError, match="max_tokens"):
        list(backend.chat([ChatMessage("user", "look", images=(png((1, 2, 3)),))], PARAMS))


def test_data_urls_both_ways_and_no_fetching() -> None:
    img = png((9, 9, 9))
    assert from_data_url(to_data_url(img), "shot.png") == img
    with pytest.raises(InvalidParameter, match="does not fetch"):
        from_data_url("https://example.com/cat.png")
    with pytest.raises(InvalidParameter, match="base64"):
        from_data_url("data:image/png,rawbytes")
    with pytest.raises(InvalidParameter, match="not a PNG"):
        from_data_url("data:image/png;base64," + base64.b64encode(b"hello").decode())
