"""Speculative decoding on the API (issue 31): a request's `"ember": {"speculative": ...}` (one of
SPECULATIVE_MODES; another value is a 400 naming it), `ember-chat serve --speculative` for the requests
that do not say, and the answer's `ember` metrics (speculative_drafted, _accepted, _mode, _speedup,
_stopped; null when it did not run). `ember-chat serve` on the chat starter with --parallel 1 (the single
sequence path, where speculation runs), through the official `openai` client, at temperature 0."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from ember_chat.engine.core.params import SPECULATIVE_MODES
from tests.helpers.peer_servers import ember_server

# A prompt the starter copies, so n-gram drafts are accepted (test_speculative.py's kind)
PASSAGE = (
    "The old mill by the river ground wheat for the village every autumn, and the miller kept a "
    "ledger of each sack, its weight and the family that brought it, in a careful small hand."
)
COPY_PROMPT = f"Repeat this text exactly.\nText: {PASSAGE}\nRepeated: {PASSAGE}\nText: {PASSAGE}\nRepeated:"
MAX_TOKENS = 48
# An answer whose prompt was prefilled whole can differ from one whose prompt came from the cache (its
# last token evaluated alone: other float sums, and the starter's greedy answer to the completion prompt
# turns at a near tie after the passage), with or without speculation: the answers compared here are
# both of a prompt already answered once.
SPECULATIVE_KEYS = (
    "speculative_drafted",
    "speculative_accepted",
    "speculative_mode",
    "speculative_speedup",
    "speculative_stopped",
)


def _client(model: Path, *extra: str) -> Iterator[openai.OpenAI]:
    with (
        ember_server(model, n_ctx=2048, extra=("--parallel", "1", *extra)) as base_url,
        openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=600) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def starter(chat_starter_model: Path) -> Iterator[openai.OpenAI]:
    """serve's default (--speculative auto)."""
    yield from _client(chat_starter_model)


@pytest.fixture(scope="module")
def starter_off(chat_starter_model: Path) -> Iterator[openai.OpenAI]:
    yield from _client(chat_starter_model, "--speculative", "off")


def chat(client: openai.OpenAI, mode: str | None, stream: bool = False) -> tuple[str, dict[str, Any]]:
    """The answer to COPY_PROMPT and its `ember` metrics (a stream's: on the chunk that ends the choice)."""
    extra = {"ember": {"speculative": mode}} if mode is not None else None
    messages: Any = [{"role": "user", "content": COPY_PROMPT}]
    if not stream:
        reply = client.chat.completions.create(
            model="", messages=messages, temperature=0, max_tokens=MAX_TOKENS, extra_body=extra
        )
        return reply.choices[0].message.content or "", (reply.model_extra or {})["ember"]
    text, ember = "", {}
    with client.chat.completions.create(
        model="", messages=messages, temperature=0, max_tokens=MAX_TOKENS, extra_body=extra, stream=True
    ) as chunks:
        for chunk in chunks:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                if chunk.choices[0].finish_reason:
                    ember = (chunk.model_extra or {})["ember"]
    return text, ember


def assert_drafted(ember: dict[str, Any], mode: str) -> None:
    assert ember["speculative_mode"] == mode
    assert ember["speculative_drafted"] > 0
    assert 0 <= ember["speculative_accepted"] <= ember["speculative_drafted"]
    assert ember["speculative_stopped"] in (True, False)
    assert ember["speculative_speedup"] is None or ember["speculative_speedup"] > 0


def assert_not_run(ember: dict[str, Any]) -> None:
    assert {key: ember[key] for key in SPECULATIVE_KEYS} == dict.fromkeys(SPECULATIVE_KEYS)


@pytest.mark.parametrize("stream", [False, True])
def test_ngram_answers_as_off_does_and_says_what_it_drafted(starter: openai.OpenAI, stream: bool) -> None:
    chat(starter, "off", stream)  # (the answers compared below then both reuse its cached prompt: see MAX_TOKENS)
    text, ember = chat(starter, "ngram", stream)
    plain, off = chat(starter, "off", stream)
    assert text == plain
    assert PASSAGE[:40] in text  # (the starter copies: its drafts are accepted)
    assert_drafted(ember, "ngram")
    assert ember["speculative_accepted"] > 0
    assert_not_run(off)


def test_a_completion_takes_the_option_too(starter: openai.OpenAI) -> None:
    def complete(mode: str) -> tuple[str, dict[str, Any]]:
        reply = starter.completions.create(
            model="", prompt=COPY_PROMPT, temperature=0, max_tokens=MAX_TOKENS,
            extra_body={"ember": {"speculative": mode}},
        )  # fmt: skip
        return reply.choices[0].text, (reply.model_extra or {})["ember"]

    complete("off")  # (the prompt cached: see MAX_TOKENS)
    (text, ember), (plain, off) = complete("ngram"), complete("off")
    assert text == plain
    assert_drafted(ember, "ngram")
    assert_not_run(off)


@pytest.mark.parametrize("value", ["fast", True, 2])
def test_a_mode_outside_the_list_is_a_400_naming_it(starter: openai.OpenAI, value: object) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        starter.chat.completions.create(
            model="", messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
            extra_body={"ember": {"speculative": value}},
        )  # fmt: skip
    assert info.value.param == "ember.speculative"
    message = str(info.value.message)
    assert "speculative" in message and all(mode in message for mode in SPECULATIVE_MODES), message


def test_the_server_default_applies_to_a_request_that_does_not_say(
    starter: openai.OpenAI, starter_off: openai.OpenAI
) -> None:
    _, ember = chat(starter, None)
    assert ember["speculative_mode"] == "auto"  # serve's default
    _, off = chat(starter_off, None)
    assert_not_run(off)  # serve --speculative off: nothing drafted
    _, asked = chat(starter_off, "ngram")  # what the request says wins over the server's default
    assert_drafted(asked, "ngram")


def test_a_response_says_it_too(starter: openai.OpenAI, starter_off: openai.OpenAI) -> None:
    """/v1/responses has no `ember` option: the server's default applies, its metrics in the Response's `ember`."""

    def ember(client: openai.OpenAI) -> dict[str, Any]:
        response = client.responses.create(model="", input=COPY_PROMPT, temperature=0, max_output_tokens=MAX_TOKENS)
        return (response.model_extra or {})["ember"]

    assert ember(starter)["speculative_mode"] == "auto"
    assert_not_run(ember(starter_off))


def test_a_sampled_answer_with_a_seed_is_the_same_with_speculation(starter: openai.OpenAI) -> None:
    def sampled(mode: str, **extra: Any) -> tuple[str, dict[str, Any]]:
        reply = starter.chat.completions.create(
            model="", messages=[{"role": "user", "content": COPY_PROMPT}], temperature=0.8, top_p=0.95, seed=21,
            max_tokens=MAX_TOKENS, extra_body={"ember": {"speculative": mode}}, **extra,
        )  # fmt: skip
        return reply.choices[0].message.content or "", (reply.model_extra or {})["ember"]

    sampled("off")  # (the prompt cached: see MAX_TOKENS)
    (text, ember), (plain, off) = sampled("ngram"), sampled("off")
    assert text == plain
    assert_drafted(ember, "ngram")
    assert_not_run(off)
    assert off["speculative_off"] is None
    # log-probabilities are read from the last evaluated row: the answer says why it did not draft
    _, with_logprobs = sampled("ngram", logprobs=True, top_logprobs=2)
    assert_not_run(with_logprobs)
    assert with_logprobs["speculative_off"] == "logprobs"
