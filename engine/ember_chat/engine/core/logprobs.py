"""One sampled token's log-probability and the likeliest alternatives there, as a plain value: the
local runtime computes it (inference/llama/logprobs.py), events carry it, the API writes it
(openai/logprobs.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TokenLogprob:
    """One sampled token: its bytes and log-probability, and the `top` most likely tokens there."""

    token: int
    piece: bytes
    logprob: float
    top: tuple[tuple[int, bytes, float], ...] = ()
