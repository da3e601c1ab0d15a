"""What a chat template gets when the caller says nothing: a model with a thinking switch thinks (as
llama-server and the window do; through the API and the CLI too), and a template that takes a
`date_string` gets today's date (as llama.cpp gives it), not the date its authors wrote in."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.inference.events import Finished
from ember_chat.engine.inference.prompt.templates import ChatMessage, JinjaTemplate
from tests.helpers.gguf_factory import TinySpec, write_tiny_model
from tests.helpers.paths import TESTS
from tests.helpers.runtime_support import loaded

TEMPLATES = TESTS / "templates"
HI = [ChatMessage("user", "Hi!")]


def test_a_thinking_switch_is_on_unless_turned_off(tmp_path: Path) -> None:
    """DeepSeek-R1 distills end the prompt with `<think>\\n</think>` (thinking off) when
    enable_thinking is not given: Ember gives it true unless the request says false."""
    source = (TEMPLATES / "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja").read_text(encoding="utf-8")
    model = write_tiny_model(tmp_path / "r1.gguf", TinySpec(chat_template=source, name="R1 Tiny"))
    with loaded(model, n_ctx=512) as rt:
        by_default = list(rt.chat(HI, SamplingParams(max_tokens=6, temperature=0.0)))[-1]
        off = list(rt.chat(HI, SamplingParams(max_tokens=6, temperature=0.0, thinking=False)))[-1]
    assert isinstance(by_default, Finished) and isinstance(off, Finished)
    assert by_default.metrics.thinking_tokens == 6  # the prompt opened the thinking: all 6 are thoughts
    assert off.metrics.thinking_tokens == 0


def test_date_string_is_today() -> None:
    source = (TEMPLATES / "meta-llama-Llama-3.1-8B-Instruct.jinja").read_text(encoding="utf-8")
    day = dt.datetime(2026, 12, 4, 9, 30)
    text = JinjaTemplate(source, "<|begin_of_text|>", "<|eot_id|>", clock=lambda: day).render(HI)
    assert "Today Date: 04 Dec 2026" in text and "26 Jul 2024" not in text
