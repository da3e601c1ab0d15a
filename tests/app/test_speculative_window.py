"""Speculative decoding in the window (issue 31): the Parameters tab's "Speculative decoding" choice is
saved with the chat and kept when a preset is picked; an answer where speculation ran shows the share of
drafted tokens accepted and the speedup in its metrics line (also after the chat is reopened: the counts
are stored with the message) and in the side panel's "Speculative" row; with it off, neither shows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.side_panel.panel import MetricsPanel
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.inference.metrics import GenerationMetrics
from tests.helpers.window import load, send, set_max_tokens

# Text the answer can copy: the drafter finds its last tokens earlier in the conversation
PROMPT = "Repeat: the quick brown fox jumps over the lazy dog. " * 6


def greedy(w: MainWindow, speculative: str) -> None:
    p = w.side.params
    p.temperature.setValue(0.0)
    p.repeat_penalty.setValue(1.0)
    p.speculative.setCurrentIndex(p.speculative.findData(speculative))
    set_max_tokens(w, 48)


def test_the_metrics_line_and_side_panel_show_the_accepted_share(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    load(qtbot, w)
    greedy(w, "ngram")
    assert w.side.params.params().speculative == "ngram"
    send(qtbot, w, PROMPT)
    m = GenerationMetrics.from_stored(w.store.thread(w.controller.conversation_id)[-1].metrics)
    assert m is not None and m.speculative_drafted and m.speculative_drafted > 0  # (stored with the message)
    assert m.speculative_accepted is not None and 0 <= m.speculative_accepted <= m.speculative_drafted
    share = m.speculative_share()
    assert m.speculative_mode == "ngram" and m.speculative_speedup is not None and share["speedup"]
    line = f"speculative {share['percent']} % of {share['drafted']} accepted, {share['speedup']}×"
    assert m.speculative_text() == line and line in w.transcript.toPlainText()
    panel = w.side.metrics
    assert panel.live_form.isRowVisible(panel.speculative) and panel.live_form.isRowVisible(panel.speedup)
    assert panel.speculative.text() == f"{share['percent']} % of {share['drafted']} accepted"
    stopped = " · stopped" if m.speculative_stopped else ""
    assert panel.speedup.text() == f"{share['speedup']}×{stopped}"

    chat = w.controller.conversation_id
    assert w.store.conversation(chat).params["speculative"] == "ngram"
    w.chats.new_chat()
    assert w.side.params.params().speculative == "auto"  # (a new chat: the app's default)
    assert not panel.live_form.isRowVisible(panel.speculative) and not panel.live_form.isRowVisible(panel.speedup)
    w.chats.open_conversation(chat)
    assert w.side.params.params().speculative == "ngram"  # the chat's saved choice
    assert line in w.transcript.toPlainText()  # the stored counts drawn again

    w.presets.use_in_chat(w.presets.library.presets()[0].id)  # a preset does not set it: the chat keeps it
    assert w.side.params.params().speculative == "ngram"


def test_off_shows_nothing_extra(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    load(qtbot, w)
    greedy(w, "off")
    send(qtbot, w, PROMPT)
    stored = w.store.thread(w.controller.conversation_id)[-1].metrics
    assert stored["speculative_drafted"] is None
    assert "speculative" not in w.transcript.toPlainText()
    assert not w.side.metrics.live_form.isRowVisible(w.side.metrics.speculative)
    assert w.store.conversation(w.controller.conversation_id).params["speculative"] == "off"  # (not the default)


def test_a_sampled_answer_speculates_too(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    load(qtbot, w)
    greedy(w, "ngram")
    w.side.params.temperature.setValue(0.7)
    send(qtbot, w, PROMPT)
    m = GenerationMetrics.from_stored(w.store.thread(w.controller.conversation_id)[-1].metrics)
    assert m is not None and m.speculative_mode == "ngram" and m.speculative_drafted
    assert m.speculative_off is None and "no speculation" not in w.side.metrics.why.text()


def bare_metrics() -> GenerationMetrics:
    return GenerationMetrics(
        **dict.fromkeys(("ttft_s", "prefill_tokens_per_s", "decode_tokens_per_s"), None),
        **dict.fromkeys(("itl_p50_ms", "itl_p95_ms", "itl_p99_ms", "tpot_ms", "quantization"), None),
        **dict.fromkeys(("prompt_tokens", "prompt_tokens_reused", "n_ctx", "context_used"), 0),
        output_tokens=57,
        e2e_s=1.0,
        stop_reason="stop",
        model="tiny",
        backend="cpu",
        threads=None,
        gpu_layers=None,
    )


def test_the_line_s_format() -> None:
    m = bare_metrics()
    assert "speculative" not in m.summary_line()
    m = replace(m, speculative_drafted=410, speculative_accepted=254)
    assert m.summary_line() == "57 tokens · stop · speculative 62 % of 410 accepted"  # (no speedup measured)
    m = replace(m, speculative_speedup=1.94)
    assert m.summary_line() == "57 tokens · stop · speculative 62 % of 410 accepted, 1.9×"
    m = replace(m, speculative_stopped=True, speculative_speedup=0.8)  # "auto" stopped it
    assert m.summary_line().endswith("speculative 62 % of 410 accepted, 0.8× (speculation stopped: it did not pay)")
    assert GenerationMetrics.from_stored(m.to_dict()) == m  # (stored with the message as a dict)
    m = replace(m, speculative_drafted=0, speculative_accepted=0)  # ran, drafted nothing: nothing to say
    assert "speculative" not in m.summary_line()
    assert SamplingParams.from_dict({"speculative": "ngram"}).speculative == "ngram"


def test_why_this_speed_says_why_speculation_did_not_run(qtbot: QtBot) -> None:
    panel = MetricsPanel()
    qtbot.addWidget(panel)
    assert "speculation" not in panel.why_text(bare_metrics())
    said = {
        "grammar": "no speculation: a grammar or JSON format constrains the answer",
        "images": "no speculation: the prompt has images",
        "logprobs": "no speculation: log-probabilities were asked for",
        "recurrent": "no speculation: this model's memory cannot take back a rejected draft",
    }
    for why, text in said.items():
        m = replace(bare_metrics(), speculative_off=why)
        assert text in panel.why_text(m)
        assert GenerationMetrics.from_stored(m.to_dict()) == m
