"""OpenAI's `logit_bias` (issue 30) through Ember's API server, with the real `openai` client on the
tiny model: -100 bans a token, +100 forces it, on chat and completions, on each way a token is chosen
(the batch decoder's runs, llama-cpp-python's own path with log-probabilities, a grammar); a hostile
body is a 400 that names the problem; the remote backend passes it on."""

from __future__ import annotations

from typing import Any

import httpx2
import openai
import pytest

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from tests.helpers.api_support import assert_error, chat_body
from tests.helpers.gguf_factory import vocabulary
from tests.helpers.remote_support import Backends, drain
from tests.helpers.sse_server import DONE, FakeOpenAI, chunk

HELLO: list[Any] = [{"role": "user", "content": "Hello"}]
PIECES, _SCORES, _TYPES = vocabulary()
HELLO_ID = PIECES.index("▁hello")
N_VOCAB = len(PIECES)


def _bytes_of(token: int) -> bytes:
    piece = PIECES[token]
    if piece.startswith("<0x") and piece.endswith(">"):
        return bytes([int(piece[3:-1], 16)])
    return piece.replace("▁", " ").encode("utf-8")


def _ids_of(data: bytes) -> list[int]:
    """Every token that is these bytes (a piece and its byte token may both be): banning them all
    leaves no way to write that one token."""
    return [t for t in range(5, N_VOCAB) if _bytes_of(t) == data]


def _chat_tokens(client: openai.OpenAI, **extra: Any) -> list[bytes]:
    """The greedy answer's tokens, as its log-probabilities list them (llama-cpp-python's own path)."""
    response = client.chat.completions.create(
        model="tiny", messages=HELLO, max_tokens=8, temperature=0, logprobs=True, **extra
    )
    content = response.choices[0].logprobs.content if response.choices[0].logprobs else None
    assert content
    return [bytes(entry.bytes or b"") for entry in content]


def test_minus_100_bans_the_token_the_model_picks(client: openai.OpenAI) -> None:
    plain = _chat_tokens(client)
    banned = _ids_of(plain[0])
    assert banned, plain[0]
    biased = _chat_tokens(client, logit_bias={str(t): -100 for t in banned})
    assert biased != plain
    assert plain[0] not in biased
    assert _chat_tokens(client) == plain  # the bias was that request's alone


def test_the_batched_path_bans_too(client: openai.OpenAI) -> None:
    """Without log-probabilities the request is a run of the batch decoder: it answers as
    llama-cpp-python's own path does, the ban included."""

    def answer(logprobs: bool, **extra: Any) -> str:
        response = client.chat.completions.create(
            model="tiny", messages=HELLO, max_tokens=8, temperature=0, logprobs=logprobs, **extra
        )
        return response.choices[0].message.content or ""

    ban = {str(t): -100 for t in _ids_of(_chat_tokens(client)[0])}
    assert answer(False) == answer(True)
    assert answer(False, logit_bias=ban) == answer(True, logit_bias=ban) != answer(False)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_plus_100_forces_the_token_on_completions(client: openai.OpenAI, temperature: float) -> None:
    response = client.completions.create(
        model="tiny", prompt="Once", max_tokens=5, temperature=temperature, seed=3, logit_bias={str(HELLO_ID): 100}
    )
    assert response.choices[0].text == " hello" * 5
    assert response.choices[0].finish_reason == "length"


@pytest.mark.parametrize("logprobs", [False, True])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_plus_100_forces_the_token_on_chat(client: openai.OpenAI, logprobs: bool, temperature: float) -> None:
    """Batched and on llama-cpp-python's own path (log-probabilities), greedy and sampled; the
    log-probabilities stay the model's own (the bias is not in them)."""
    response = client.chat.completions.create(
        model="tiny", messages=HELLO, max_tokens=4, temperature=temperature, seed=3, logprobs=logprobs,
        logit_bias={str(HELLO_ID): 100},
    )  # fmt: skip
    assert (response.choices[0].message.content or "").strip() == " ".join(["hello"] * 4)
    if logprobs:
        content = response.choices[0].logprobs.content if response.choices[0].logprobs else None
        assert content and all(entry.token == " hello" for entry in content)
        assert all(entry.logprob < -1.0 for entry in content)  # a random tiny model's own odds, not ~1


def test_a_ban_holds_under_a_grammar(client: openai.OpenAI) -> None:
    def answer(**extra: Any) -> str:
        response = client.completions.create(
            model="tiny", prompt="Is it?", max_tokens=4, temperature=0, extra_body={"grammar": 'root ::= "x" | "y"'},
            **extra,
        )  # fmt: skip
        return response.choices[0].text

    plain = answer()
    assert plain in ("x", "y")
    assert answer(logit_bias={str(t): -100 for t in _ids_of(plain.encode())}) == ("y" if plain == "x" else "x")


def test_llama_servers_array_form_and_false(http: httpx2.Client) -> None:
    for bias in ([[HELLO_ID, 100]], {str(HELLO_ID): 100, "5": False}, [[HELLO_ID, 100], [6, False]]):
        response = http.post("/v1/completions", json={"model": "tiny", "prompt": "Once", "max_tokens": 3,
                                                      "temperature": 0, "logit_bias": bias})  # fmt: skip
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["text"] == " hello" * 3
    for empty in (None, {}, []):
        assert http.post("/v1/chat/completions", json=chat_body(logit_bias=empty)).status_code == 200


@pytest.mark.parametrize(
    ("bias", "words"),
    [
        ({"hello": 5}, "'hello' is not a token id"),
        ({"-1": 5}, "'-1' is not a token id"),
        ({"1.5": 5}, "'1.5' is not a token id"),
        ({"12": 101}, "token 12 must be a number from -100 to 100"),
        ({"12": -100.5}, "token 12 must be a number from -100 to 100"),
        ({"12": "5"}, "token 12 must be a number from -100 to 100"),
        ({"12": True}, "token 12 must be a number from -100 to 100"),
        ({"12": None}, "token 12 must be a number from -100 to 100"),
        ({str(t): 1 for t in range(1025)}, "at most 1,024"),
        ([[12, 1], [12, 2]], "token 12 is given twice"),
        ([["hello", 5]], "token ids, not text"),
        ([[12]], "[token id, bias] pair"),
        ("12", "must be an object of token ids"),
        (12, "must be an object of token ids"),
    ],
)
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_bad_logit_bias_is_400_naming_the_problem(http: httpx2.Client, path: str, bias: Any, words: str) -> None:
    body = chat_body(logit_bias=bias) if "chat" in path else {"model": "tiny", "prompt": "Once", "logit_bias": bias}
    assert words in assert_error(http.post(path, json=body), 400, "logit_bias")


@pytest.mark.parametrize("logprobs", [False, True])  # a batched run, and llama-cpp-python's own path
def test_a_token_outside_the_vocabulary_is_400(http: httpx2.Client, logprobs: bool) -> None:
    body = chat_body(logit_bias={str(N_VOCAB): -100, "12": 1}, logprobs=logprobs)
    message = assert_error(http.post("/v1/chat/completions", json=body), 400, code="invalid_parameter")
    assert f"token {N_VOCAB} is not in the model's vocabulary" in message
    streamed = http.post("/v1/chat/completions", json={**body, "stream": True})
    assert f"token {N_VOCAB} is not in the model's vocabulary" in assert_error(streamed, 400)


def test_the_remote_backend_passes_it_on(server: FakeOpenAI, backends: Backends) -> None:
    server.stream([chunk("Hi"), chunk(finish="stop"), DONE])
    backend = backends.make(server)
    params = SamplingParams(logit_bias=((12, -100.0), (7, 2.5)))
    drain(backend.chat([ChatMessage("user", "Hi")], params))
    assert server.generate_requests()[-1].body["logit_bias"] == {"7": 2.5, "12": -100.0}
    server.stream([chunk("Hi"), chunk(finish="stop"), DONE])
    drain(backend.chat([ChatMessage("user", "Hi")], SamplingParams()))
    assert "logit_bias" not in server.generate_requests()[-1].body
    assert SamplingParams.from_dict(params.to_dict()) == params
    assert "logit_bias" not in SamplingParams().to_dict()  # saved chats stay as they were
