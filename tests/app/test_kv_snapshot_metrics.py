"""Issue 20: *why this speed* says how much of the prompt came back from a saved conversation cache
(a KV snapshot) and how much was evaluated."""

from __future__ import annotations

from dataclasses import replace

from pytestqt.qtbot import QtBot

from ember_chat.app.side_panel.panel import MetricsPanel
from ember_chat.engine.inference.metrics import GenerationMetrics

METRICS = GenerationMetrics(
    ttft_s=0.05, prompt_tokens=2060, prompt_tokens_reused=2048, prefill_tokens_per_s=240.0,
    decode_tokens_per_s=60.0, output_tokens=8, itl_p50_ms=16.0, itl_p95_ms=17.0, itl_p99_ms=18.0,
    tpot_ms=16.0, e2e_s=0.2, stop_reason="length", n_ctx=4096, context_used=2068, model="m",
    quantization="Q4_K_M", backend="CPU", threads=2, gpu_layers=0,
)  # fmt: skip


def test_why_this_speed_says_how_many_tokens_were_restored_from_a_snapshot(qtbot: QtBot) -> None:
    panel = MetricsPanel()
    qtbot.addWidget(panel)
    panel.begin()
    panel.finish(replace(METRICS, prompt_tokens_restored=2048), [])
    why = panel.why.text()
    assert why.startswith("Prompt: 2,048 tokens restored from a snapshot, 12 evaluated · ")
    assert "reused from the cache" not in why and why.endswith("CPU, 2 threads, 0 GPU layers")
    # a snapshot shorter than what the sequence kept itself: the rest is said as reused
    mixed = panel.why_text(replace(METRICS, prompt_tokens_restored=1024))
    assert mixed.startswith("Prompt: 1,024 tokens restored from a snapshot, 12 evaluated, 1,024 reused from the cache")
    # nothing restored: the line as before
    plain = panel.why_text(METRICS)
    assert plain.startswith("Prompt: 12 tokens evaluated, 2,048 reused from the cache") and "snapshot" not in plain
