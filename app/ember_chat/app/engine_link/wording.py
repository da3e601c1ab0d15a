"""The engine's one-line texts (metrics line, backend badge, model status) in the window's language:
the engine's templates (engine/inference/wording.py), each through Qt's translation functions."""

from __future__ import annotations

from functools import cache

from PySide6.QtCore import QCoreApplication

from ember_chat.engine.inference.wording import Wording


@cache
def window_wording() -> Wording:
    """Made once, after the translator is installed (the first answer or model shown). Each call is
    spelled out, as pyside6-lupdate finds translate("context", "literal") and not a wrapper."""
    translate = QCoreApplication.translate
    return Wording(
        ttft=translate("Wording", "TTFT {seconds} s"),
        decode=translate("Wording", "{rate} tok/s"),
        tokens=translate("Wording", "{count} tokens"),
        estimated_tokens=translate("Wording", "~{count} tokens"),
        token=translate("Wording", "{count} token"),
        estimated_token=translate("Wording", "~{count} token"),
        thinking=translate("Wording", "{count} thinking"),
        seed=translate("Wording", "seed {seed}"),
        speculative=translate("Wording", "speculative {percent} % of {drafted} accepted"),
        speculative_speedup=translate("Wording", "{speedup}×"),
        speculative_stopped=translate("Wording", "speculation stopped: it did not pay"),
        valid_json=translate("Wording", "valid JSON"),
        invalid_json=translate("Wording", "not valid JSON: {problem}"),
        reasons={
            "stop": translate("Wording", "stop"),
            "length": translate("Wording", "max tokens reached"),
            "stop_string": translate("Wording", "stop string"),
            "context_full": translate("Wording", "context full"),
            "tool_calls": translate("Wording", "called tools"),
            "cancelled": translate("Wording", "stopped"),
            "interrupted": translate("Wording", "interrupted"),
            "error": translate("Wording", "error"),
        },
        remote_badge=translate("Wording", "Remote · {connection}"),
        local_badge=translate("Wording", "{backend} · {threads} threads · {layers} GPU layers"),
        local_badge_one_thread=translate("Wording", "{backend} · 1 thread · {layers} GPU layers"),
        context=translate("Wording", "{n} ctx"),
        kv_cache=translate("Wording", "KV {type}"),
        parameters=translate("Wording", "{millions}M params"),
        remote=translate("Wording", "remote"),
    )
