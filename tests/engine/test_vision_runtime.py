"""Issue 17: a model loaded with its projector sees images through llama.cpp's mtmd (the tiny vision
model generated at test time: a tiny LLM and a Gemma-3-type projector with random weights)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember_chat.engine.core.messages import ChatMessage, ImageInput
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.errors import ImagesNotSupported, InvalidParameter, ModelLoadError
from ember_chat.engine.inference.events import Finished, PromptReady
from tests.helpers.gguf_factory import TinySpec, write_tiny_model
from tests.helpers.images import png
from tests.helpers.runtime_support import loaded
from tests.helpers.vision_factory import TinyVisionSpec, write_tiny_mmproj, write_tiny_vision_model

GREEDY = SamplingParams(temperature=0.0, max_tokens=4, seed=1)


@pytest.fixture(scope="module")
def vision_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_tiny_vision_model(tmp_path_factory.mktemp("vision"))


def run(rt: object, messages: list[ChatMessage]) -> tuple[PromptReady, Finished]:
    events = list(rt.chat(messages, GREEDY))  # type: ignore[attr-defined]
    ready = next(e for e in events if isinstance(e, PromptReady))
    done = events[-1]
    assert isinstance(done, Finished)
    return ready, done


def test_the_projector_beside_the_model_is_loaded_and_says_vision(vision_model: tuple[Path, Path]) -> None:
    model, mmproj = vision_model
    with loaded(model) as rt:
        assert rt.vision is not None and rt.vision.path == mmproj
        assert rt.description is not None and rt.description.vision


def test_an_image_is_encoded_once_and_its_embedding_reused(vision_model: tuple[Path, Path]) -> None:
    model, mmproj = vision_model
    red = png((255, 0, 0))
    with loaded(model, mmproj=mmproj) as rt:
        first = [ChatMessage("user", "what is this?", images=(red,))]
        ready, done = run(rt, first)
        # the prompt counts the image's positions as well as its text
        text_only = len(
            rt.tokenize("<|im_start|>user\n\nwhat is this?<|im_end|>\n<|im_start|>assistant\n", special=True)
        )
        assert ready.prompt_tokens > text_only + TinyVisionSpec().image_tokens
        assert rt.vision.encodes == 1
        assert done.metrics.image_encode_ms is not None and done.metrics.image_encode_ms > 0
        assert done.metrics.to_dict()["image_encode_ms"] == done.metrics.image_encode_ms

        # a follow-up: the image and the first turn are reused from the KV cache, not evaluated again
        follow = [*first, ChatMessage("assistant", done.text), ChatMessage("user", "and its colour?")]
        ready2, done2 = run(rt, follow)
        assert ready2.prompt_tokens_reused >= ready.prompt_tokens - 1
        assert rt.vision.encodes == 1
        assert done2.metrics.image_encode_ms == 0.0

        # the KV cache lost: the image is decoded again from its cached embedding, not encoded
        rt.reset_cache()
        ready3, done3 = run(rt, follow)
        assert ready3.prompt_tokens_reused == 0
        assert rt.vision.encodes == 1 and done3.metrics.image_encode_ms == 0.0
        assert done3.text == done2.text  # the same positions, the same embedding: the same answer


def test_another_image_is_not_mistaken_for_the_first(vision_model: tuple[Path, Path]) -> None:
    model, _ = vision_model
    with loaded(model) as rt:
        ready, _ = run(rt, [ChatMessage("user", "what is this?", images=(png((255, 0, 0)),))])
        ready2, done2 = run(rt, [ChatMessage("user", "what is this?", images=(png((0, 0, 255)),))])
        assert ready2.prompt_tokens_reused < ready.prompt_tokens - TinyVisionSpec().image_tokens
        assert rt.vision.encodes == 2
        assert done2.metrics.image_encode_ms > 0


def test_a_text_only_model_refuses_images(tmp_path: Path) -> None:
    model = write_tiny_model(tmp_path / "text.gguf", TinySpec())
    with loaded(model) as rt:
        assert rt.vision is None and not rt.description.vision
        with pytest.raises(ImagesNotSupported, match="cannot see images"):
            list(rt.chat([ChatMessage("user", "look", images=(png((1, 2, 3)),))], GREEDY))
        # text alone still works and says nothing about images
        _, done = run(rt, [ChatMessage("user", "hello")])
        assert done.metrics.image_encode_ms is None


def test_a_file_that_is_not_an_image_is_refused_with_its_name(vision_model: tuple[Path, Path]) -> None:
    model, _ = vision_model
    with loaded(model) as rt:
        bad = ImageInput.from_bytes(b"not an image at all", "notes.png")
        with pytest.raises(InvalidParameter, match=r"notes\.png"):
            list(rt.chat([ChatMessage("user", "look", images=(bad,))], GREEDY))


def test_a_projector_of_another_model_fails_the_load_when_named(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    model = write_tiny_model(tmp_path / "m" / "m.gguf", TinySpec())
    wrong = write_tiny_mmproj(tmp_path / "mmproj-x.gguf", text_dim=32)  # the LLM's width is 64
    with pytest.raises(ModelLoadError, match=r"mmproj-x\.gguf"), loaded(model, mmproj=wrong):
        pass
