"""Issue 20, many clients at once through the API: the real `ember-chat serve --parallel 4` (its own
process) on the real chat starter, four streaming clients (the real `openai` client, one thread each)
are decoded together: every stream has its first token before any stream has finished, and each greedy
answer is token for token the answer the same request gets alone."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import openai

from tests.helpers.presets_cli import serving

PROMPTS = (
    "Write a short story about a lighthouse keeper.",
    "List the planets of the solar system and say one thing about each.",
    "Explain how bread rises, step by step, for a child who likes baking and asks why at every step.",
    "Hi",
)
TOKENS = 40


def _ask(client: openai.OpenAI, prompt: str, times: dict[str, float] | None = None) -> str:
    stream = client.chat.completions.create(
        model="starter", messages=[{"role": "user", "content": prompt}], max_tokens=TOKENS, temperature=0,
        stream=True, stream_options={"include_usage": True}, extra_body={"ignore_eos": True},
    )  # fmt: skip
    text, usage = [], None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            if times is not None and "first" not in times:
                times["first"] = time.perf_counter()
            text.append(chunk.choices[0].delta.content)
        usage = chunk.usage or usage
    if times is not None:
        times["end"] = time.perf_counter()
    assert usage is not None and usage.completion_tokens == TOKENS
    return "".join(text)


def _together(client: openai.OpenAI) -> tuple[list[str | BaseException], list[dict[str, float]]]:
    """The prompts asked at once, one client thread each (released together); answers and stream times."""
    start = threading.Barrier(len(PROMPTS))
    times: list[dict[str, float]] = [{} for _ in PROMPTS]
    answers: list[str | BaseException] = ["" for _ in PROMPTS]

    def one(i: int) -> None:
        try:
            start.wait(30)
            answers[i] = _ask(client, PROMPTS[i], times[i])
        except BaseException as exc:  # (said by the test's assertions, on its own thread)
            answers[i] = exc

    threads = [threading.Thread(target=one, args=(i,), name=f"client-{i}") for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads)
    return answers, times


def test_four_streaming_clients_are_served_together_with_the_answers_they_get_alone(
    chat_starter_model: Path, tmp_path: Path
) -> None:
    """Alone: a server that answers one request at a time (`--parallel 1`); together: a fresh one with
    four sequences. (On a server whose sequences still hold earlier conversations, llama.cpp's CPU
    attention adds a sequence's cells in the order they sit in the shared cache, and a greedy answer may
    take another token where its two best were nearly tied: tests/engine/test_runtime_batched.py measures
    those margins.)"""
    args = ("--model", str(chat_starter_model), "--alias", "starter", "--ctx", "2048")
    (tmp_path / "one").mkdir()
    (tmp_path / "four").mkdir()
    with (
        serving(tmp_path / "one", *args, "--parallel", "1") as (url, _line),
        openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120) as client,
    ):
        alone = [_ask(client, p) for p in PROMPTS]
    with (
        serving(tmp_path / "four", *args, "--parallel", "4") as (url, _line),
        openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120) as client,
    ):
        answers, times = _together(client)
    errors = [a for a in answers if isinstance(a, BaseException)]
    assert not errors, errors
    assert max(t["first"] for t in times) < min(t["end"] for t in times)  # all four streamed at once
    assert answers == alone  # greedy: batched answers are the answers alone
