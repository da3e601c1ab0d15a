"""The words of the engine's one-line texts — an answer's metrics line, the backend badge, a model's
status — as templates, so the window can hand in translated ones (app/ember_chat/app/engine_link/wording.py)
while the engine stays free of Qt and the command line speaks English."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ember_chat.engine.core.states import StopReason

# How each stop reason reads to a person (the API and stored chats keep the OpenAI words: "length")
REASON_WORDS = {
    StopReason.STOP: "stop",
    StopReason.LENGTH: "max tokens reached",
    StopReason.STOP_STRING: "stop string",
    StopReason.CONTEXT_FULL: "context full",
    StopReason.TOOL_CALLS: "called tools",
    StopReason.CANCELLED: "stopped",
    StopReason.INTERRUPTED: "interrupted",
    StopReason.ERROR: "error",
}


@dataclass(frozen=True)
class Wording:
    ttft: str = "TTFT {seconds} s"
    decode: str = "{rate} tok/s"
    tokens: str = "{count} tokens"
    estimated_tokens: str = "~{count} tokens"
    token: str = "{count} token"  # (one: "1 tokens" was shown)
    estimated_token: str = "~{count} token"
    thinking: str = "{count} thinking"
    seed: str = "seed {seed}"
    speculative: str = "speculative {percent} % of {drafted} accepted"  # drafted tokens the model kept
    speculative_speedup: str = "{speedup}×"  # the answer's decode time without speculation / with it
    speculative_stopped: str = "speculation stopped: it did not pay"  # ("auto", for the rest of the answer)
    valid_json: str = "valid JSON"
    invalid_json: str = "not valid JSON: {problem}"
    reasons: Mapping[str, str] = field(default_factory=lambda: {str(r): w for r, w in REASON_WORDS.items()})
    remote_badge: str = "Remote · {connection}"
    local_badge: str = "{backend} · {threads} threads · {layers} GPU layers"
    local_badge_one_thread: str = "{backend} · 1 thread · {layers} GPU layers"
    context: str = "{n} ctx"
    kv_cache: str = "KV {type}"
    parameters: str = "{millions}M params"
    remote: str = "remote"

    def reason(self, stop_reason: str) -> str:
        return self.reasons.get(stop_reason, stop_reason)

    def token_count(self, count: int, estimated: bool = False) -> str:
        """'1 token', '128 tokens' ('~' before an estimate)."""
        if estimated:
            return (self.estimated_token if count == 1 else self.estimated_tokens).format(count=count)
        return (self.token if count == 1 else self.tokens).format(count=count)


ENGLISH = Wording()
