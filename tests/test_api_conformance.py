"""Ember's API server against OpenAI's and llama-server's conventions (issue 18, API conformance):
a conversation too long for the context, /health without the key, /tokenize and /detokenize,
unknown request fields, the model alias. The real `openai` client on a tiny model, raw HTTP where
the client cannot express the case."""

from __future__ import annotations

from typing import Any

import httpx2
import openai
import pytest

from tests.api_support import assert_error, chat_body, client, http, serve, tiny_server, tiny_service

__all__ = ["client", "http", "serve", "tiny_server", "tiny_service"]  # fixtures from tests/api_support.py

# ----- a conversation longer than the context


def _long_history(turns: int = 12) -> list[dict[str, Any]]:
    """Each message fits the 512-token context alone; all of them do not."""
    history: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for i in range(turns):
        history.append({"role": "user", "content": f"question {i} " + "word " * 40})
        history.append({"role": "assistant", "content": f"answer {i} " + "word " * 40})
    history.append({"role": "user", "content": "and now?"})
    return history


@pytest.mark.parametrize("stream", [False, True])
def test_history_longer_than_the_context_is_400(client: openai.OpenAI, stream: bool) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="tiny", messages=_long_history(), max_tokens=8, stream=stream)
    assert info.value.code == "context_length_exceeded"
    assert "trim_history" in str(info.value.message)


@pytest.mark.parametrize("stream", [False, True])
def test_trim_history_opts_into_dropping_the_oldest_messages(client: openai.OpenAI, stream: bool) -> None:
    extra = {"ember": {"trim_history": True}}
    if not stream:
        response = client.chat.completions.create(
            model="tiny", messages=_long_history(), max_tokens=4, temperature=0, extra_body=extra
        )
        assert response.choices[0].finish_reason in ("stop", "length")
        assert (response.model_extra or {})["ember"]["dropped_messages"] > 0
        return
    finish = None
    ember: dict[str, Any] = {}
    with client.chat.completions.create(
        model="tiny", messages=_long_history(), max_tokens=4, temperature=0, stream=True, extra_body=extra
    ) as chunks:
        for chunk in chunks:
            if chunk.choices and chunk.choices[0].finish_reason:
                finish = chunk.choices[0].finish_reason
                ember = (chunk.model_extra or {})["ember"]
    assert finish in ("stop", "length")
    assert ember["dropped_messages"] > 0


def test_ember_extension_is_validated(http: httpx2.Client) -> None:
    body = chat_body(ember={"trim_history": "yes"})
    assert_error(http.post("/v1/chat/completions", json=body), 400, "ember")
    body = chat_body(ember={"trim_historie": True})
    assert "trim_historie" in assert_error(http.post("/v1/chat/completions", json=body), 400, "ember")
