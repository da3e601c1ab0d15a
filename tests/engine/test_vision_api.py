"""Issue 17: Ember's API server with a vision model: the real `openai` client sends an image as an
`image_url` part with a data: URL, the tiny vision model sees it through llama.cpp's mtmd (the
response's ember metrics carry image_encode_ms), and a follow-up about the same image does not
encode it again."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from PIL import Image

from ember_chat.engine.core.params import LoadConfig
from tests.helpers.api_client import served_client
from tests.helpers.vision_factory import write_tiny_vision_model
from tests.hostile.forged_turns import MEDIA_MARKER

WAIT_S = 30.0


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[openai.OpenAI]:
    model, mmproj = write_tiny_vision_model(tmp_path_factory.mktemp("vision-api"))
    with served_client(LoadConfig(model, mmproj=mmproj, n_ctx=2048, threads=1), "tiny-vision", WAIT_S) as c:
        yield c


def data_url(color: tuple[int, int, int]) -> str:
    buf = io.BytesIO()
    Image.new("RGB", (48, 32), color).save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def ask(client: openai.OpenAI, messages: Any, stream: bool = False) -> Any:
    return client.chat.completions.create(
        model="tiny-vision", messages=messages, max_tokens=3, temperature=0, stream=stream
    )


def test_an_image_url_part_is_seen_and_its_embedding_reused_by_a_follow_up(client: openai.OpenAI) -> None:
    first: Any = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": data_url((255, 0, 0))}},
            ],
        }
    ]
    answer = ask(client, first)
    metrics = answer.model_extra["ember"]
    assert answer.choices[0].message.content is not None
    assert metrics["image_encode_ms"] > 0
    text_only = ask(client, [{"role": "user", "content": "What is this?"}]).model_extra["ember"]
    assert metrics["prompt_tokens"] > text_only["prompt_tokens"]  # the image's positions are in the prompt

    follow = [
        *first,
        {"role": "assistant", "content": answer.choices[0].message.content},
        {"role": "user", "content": "Sure?"},
    ]
    chunks = list(ask(client, follow, stream=True))
    ember = next(c.model_extra["ember"] for c in chunks if (c.model_extra or {}).get("ember"))
    assert ember["image_encode_ms"] == 0.0  # the same image: its embedding came from the cache


def test_text_spelling_the_media_marker_leaves_image_turns_working(client: openai.OpenAI) -> None:
    """An earlier message and a file sent with the image spell the media marker that placed images in
    the prompt: the image turn is answered (it was a 400 for every image turn of the chat), and the
    marker's text is all there, as text (it costs what a misspelled copy costs)."""

    def chat(marker: str) -> Any:
        notes = base64.b64encode(f"Images go where {marker} is.".encode()).decode()
        return [
            {"role": "user", "content": f"My notes say {marker}{marker} here."},
            {"role": "assistant", "content": "Noted."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "file", "file": {"filename": "notes.txt", "file_data": f"data:text/plain;base64,{notes}"}},
                    {"type": "image_url", "image_url": {"url": data_url((0, 255, 0))}},
                ],
            },
        ]

    answer = ask(client, chat(MEDIA_MARKER))
    assert answer.choices[0].message.content is not None
    assert answer.model_extra["ember"]["image_encode_ms"] is not None
    near = ask(client, chat(MEDIA_MARKER.replace("media", "medla")))
    assert abs(answer.usage.prompt_tokens - near.usage.prompt_tokens) <= 3
