"""Long prompts are evaluated in chunks with their progress (and Stop works between and inside them);
short ones are left to llama.cpp in one go."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.side_panel.panel import MetricsPanel
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.inference.events import Finished, PrefillProgress, Token
from ember_chat.engine.inference.local.runtime import LocalRuntime
from tests.helpers.runtime_support import loaded

LONG = " ".join(["the world is round and the sky is blue"] * 30)


@pytest.fixture
def small_batches(tiny_model: Path) -> Iterator[LocalRuntime]:
    with loaded(tiny_model, n_ctx=2048, n_batch=32) as rt:
        yield rt


def test_a_long_prompt_reports_its_progress(small_batches: LocalRuntime) -> None:
    events = list(small_batches.chat([ChatMessage("user", LONG)], SamplingParams(max_tokens=4, temperature=0)))
    progress = [e for e in events if isinstance(e, PrefillProgress)]
    fin = events[-1]
    assert isinstance(fin, Finished) and fin.metrics.output_tokens == 4
    assert len(progress) >= 3
    assert [p.done for p in progress] == sorted(p.done for p in progress) and progress[-1].done == progress[-1].total
    assert progress[-1].total == fin.metrics.prompt_tokens - 1  # (the last prompt token goes with the first answer)
    assert all(p.done - q.done <= 32 for q, p in pairwise(progress))
    # the follow-up reuses the whole evaluated prompt from the KV cache
    follow = [*([ChatMessage("user", LONG), ChatMessage("assistant", fin.text)]), ChatMessage("user", "and?")]
    again = list(small_batches.chat(follow, SamplingParams(max_tokens=2)))
    assert again[-1].metrics.prompt_tokens_reused >= fin.metrics.prompt_tokens - 1


def test_stop_during_a_long_prompt(small_batches: LocalRuntime) -> None:
    events = []
    for ev in small_batches.chat([ChatMessage("user", LONG)], SamplingParams(max_tokens=4)):
        events.append(ev)
        if isinstance(ev, PrefillProgress):
            small_batches.request_stop()
    fin = events[-1]
    assert isinstance(fin, Finished) and fin.reason == "cancelled" and fin.metrics.output_tokens == 0
    assert not [e for e in events if isinstance(e, Token)]
    assert len([e for e in events if isinstance(e, PrefillProgress)]) == 1  # stopped after the first chunk
    # and the model answers the next request normally
    after = list(small_batches.chat([ChatMessage("user", "hi")], SamplingParams(max_tokens=3)))
    assert after[-1].reason == "length" and after[-1].metrics.output_tokens == 3


def test_a_short_prompt_is_not_chunked(small_batches: LocalRuntime) -> None:
    events = list(small_batches.chat([ChatMessage("user", "hi")], SamplingParams(max_tokens=2)))
    assert not [e for e in events if isinstance(e, PrefillProgress)]


def test_the_panel_shows_prompt_progress_and_time_left(qtbot: QtBot) -> None:
    panel = MetricsPanel()
    qtbot.addWidget(panel)
    panel.begin()
    panel.show_prefill(250, 1000)
    assert "prompt 25 %" in panel.ttft.text() and "s left" in panel.ttft.text()
    panel.begin()
    assert "prompt" not in panel.ttft.text()


def test_why_line_explains_the_answer(qtbot: QtBot, small_batches: LocalRuntime) -> None:
    panel = MetricsPanel()
    qtbot.addWidget(panel)
    first = list(small_batches.chat([ChatMessage("user", LONG)], SamplingParams(max_tokens=2)))[-1]
    follow = [ChatMessage("user", LONG), ChatMessage("assistant", first.text), ChatMessage("user", "more")]
    again = list(small_batches.chat(follow, SamplingParams(max_tokens=2)))[-1]
    panel.begin()
    panel.finish(again.metrics, [])
    why = panel.why.text()
    reused = f"{again.metrics.prompt_tokens_reused:,} reused from the cache"
    assert reused in why and "nothing left out" in why and "CPU, 1 thread, 0 GPU layers" in why
