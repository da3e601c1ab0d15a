"""Log-probabilities in OpenAI's shapes: chat's `{"content": [{token, logprob, bytes, top_logprobs}],
"refusal": null}` and the completions API's `{tokens, token_logprobs, top_logprobs, text_offset}`."""

from __future__ import annotations

from typing import Any

from ember_chat.engine.core.logprobs import TokenLogprob


def _text(piece: bytes) -> str:
    return piece.decode("utf-8", errors="replace")


def chat_logprobs(entries: list[TokenLogprob]) -> dict[str, Any]:
    content = [
        {
            "token": _text(e.piece),
            "logprob": e.logprob,
            "bytes": list(e.piece),
            "top_logprobs": [{"token": _text(p), "logprob": lp, "bytes": list(p)} for _, p, lp in e.top],
        }
        for e in entries
    ]
    return {"content": content, "refusal": None}


def completion_logprobs(entries: list[TokenLogprob], offset: int = 0) -> dict[str, Any]:
    """`offset`: where the first entry's text starts in the answer (a stream's later chunks)."""
    offsets = []
    for e in entries:
        offsets.append(offset)
        offset += len(_text(e.piece))
    return {
        "tokens": [_text(e.piece) for e in entries],
        "token_logprobs": [e.logprob for e in entries],
        "top_logprobs": [{_text(p): lp for _, p, lp in e.top} for e in entries],
        "text_offset": offsets,
    }
