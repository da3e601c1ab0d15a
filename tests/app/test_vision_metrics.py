"""Issue 17: the image encode time is its own figure in "why this speed" (real metrics from the tiny
vision model through llama.cpp's mtmd)."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from ember_chat.app.side_panel.panel import MetricsPanel
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from tests.helpers.images import png
from tests.helpers.runtime_support import loaded
from tests.helpers.vision_factory import write_tiny_vision_model

PARAMS = SamplingParams(temperature=0.0, max_tokens=2, seed=1)


def test_why_this_speed_names_the_image_encode_time(qtbot: QtBot, tmp_path: Path) -> None:
    model, _ = write_tiny_vision_model(tmp_path)
    panel = MetricsPanel()
    qtbot.addWidget(panel)
    with loaded(model) as rt:
        first = [ChatMessage("user", "what is this?", images=(png((255, 0, 0)),))]
        done = list(rt.chat(first, PARAMS))[-1]
        follow = [*first, ChatMessage("assistant", done.text), ChatMessage("user", "sure?")]
        again = list(rt.chat(follow, PARAMS))[-1]
        text_only = list(rt.chat([ChatMessage("user", "hi")], PARAMS))[-1]
    panel.begin()
    panel.finish(done.metrics, [])
    assert f"images encoded in {done.metrics.image_encode_ms:,.1f} ms" in panel.why.text()
    panel.begin()
    panel.finish(again.metrics, [])
    assert again.metrics.image_encode_ms == 0.0
    assert "images from the cache (not encoded again)" in panel.why.text()
    panel.begin()
    panel.finish(text_only.metrics, [])
    assert "image" not in panel.why.text()
