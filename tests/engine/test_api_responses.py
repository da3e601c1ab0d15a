"""OpenAI's Responses API on Ember's server (/v1/responses), through the official `openai` client: a
Response and its stream of typed events over the tiny model (its usage the chat route's for the same
conversation), a thinking model's reasoning item (a scripted tiny model), a function-tool round trip
with previous_response_id (tests/helpers/api_tools.py's scripted ToolBackend), retrieve and delete,
`store: false`, and the 400s and 404s in OpenAI's error shape."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.request_log import HttpExchange
from ember_chat.engine.serve.responses_route import ResponseStore, read_turn
from ember_chat.engine.serve.server import ApiServer
from tests.helpers.api_support import WAIT_S, assert_api_error, assert_error
from tests.helpers.api_tools import CALL_TOKENS, WEATHER, ToolBackend, tool_server, weather
from tests.helpers.gguf_factory import CHATML_TEMPLATE, TinySpec, says, write_tiny_model
from tests.helpers.images import png
from tests.helpers.scripted_backend import FailsMidway

# WEATHER in the Responses API's shape: the function's fields at the top
TOOL = {"type": "function", **WEATHER["function"], "strict": False}
ASK = "What is the weather in Paris?"


def _text(response: Any) -> str:
    return "".join(p.text for item in response.output if item.type == "message" for p in item.content)


# ----- the tiny model


def test_a_response_and_its_usage_as_the_chat_routes(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model="tiny", instructions="Be brief.", input="Say hello", max_output_tokens=6, temperature=0
    )
    chat = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello"}],
        max_tokens=6,
        temperature=0,
    )
    assert response.id.startswith("resp_") and response.object == "response" and response.model == "tiny"
    assert response.instructions == "Be brief." and response.max_output_tokens == 6
    (message,) = response.output
    assert message.type == "message" and message.role == "assistant"
    assert _text(response) == chat.choices[0].message.content  # greedy: the same answer as the chat route's
    if chat.choices[0].finish_reason == "length":
        assert response.status == "incomplete" and response.incomplete_details is not None
        assert response.incomplete_details.reason == "max_output_tokens"
    else:
        assert response.status == "completed" and response.incomplete_details is None
    assert response.usage is not None and chat.usage is not None
    assert response.usage.input_tokens == chat.usage.prompt_tokens
    assert response.usage.output_tokens == chat.usage.completion_tokens
    assert response.usage.total_tokens == chat.usage.total_tokens
    assert response.usage.output_tokens_details.reasoning_tokens == 0


def test_the_stream_of_typed_events(client: openai.OpenAI, http: httpx2.Client) -> None:
    whole = client.responses.create(model="tiny", input="Say hello", max_output_tokens=6, temperature=0, store=False)
    events = list(
        client.responses.create(model="tiny", input="Say hello", max_output_tokens=6, temperature=0, stream=True)
    )
    kinds = [e.type for e in events]
    last = "response.incomplete" if whole.status == "incomplete" else "response.completed"
    assert kinds[:5] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta",
    ]  # fmt: skip
    assert kinds[-4:] == [
        "response.output_text.done", "response.content_part.done", "response.output_item.done", last,
    ]  # fmt: skip
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == _text(whole) == events[-4].text  # type: ignore[union-attr]
    final = events[-1].response  # type: ignore[union-attr]
    assert final.id == events[0].response.id and _text(final) == deltas  # type: ignore[union-attr]
    assert final.usage is not None and final.usage.output_tokens == whole.usage.output_tokens  # type: ignore[union-attr]
    # on the wire: an `event:` line naming each event's type, and no [DONE]
    body = {"model": "tiny", "input": "Say hello", "max_output_tokens": 2, "stream": True}
    with http.stream("POST", "/v1/responses", json=body) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
        text = r.read().decode()
    blocks = [b for b in text.split("\n\n") if b]
    for block in blocks:
        event, data = block.split("\n")
        assert event.removeprefix("event: ") == json.loads(data.removeprefix("data: "))["type"]
    assert "[DONE]" not in text


def test_retrieve_delete_and_store_false(client: openai.OpenAI) -> None:
    kept = client.responses.create(model="tiny", input="hi", max_output_tokens=2)
    again = client.responses.retrieve(kept.id)
    assert again.id == kept.id and _text(again) == _text(kept) and again.usage == kept.usage
    client.responses.delete(kept.id)
    with pytest.raises(openai.NotFoundError) as gone:
        client.responses.retrieve(kept.id)
    assert_api_error(gone.value, 404)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(kept.id)
    unkept = client.responses.create(model="tiny", input="hi", max_output_tokens=2, store=False)
    assert unkept.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unkept.id)
    with pytest.raises(openai.NotFoundError) as missing:
        client.responses.create(model="tiny", input="more", previous_response_id=unkept.id, max_output_tokens=2)
    assert_api_error(missing.value, 404, "previous_response_id")


def test_previous_response_id_continues_the_conversation(client: openai.OpenAI) -> None:
    first = client.responses.create(model="tiny", input="hi", max_output_tokens=3, temperature=0)
    second = client.responses.create(
        model="tiny", input="and again", previous_response_id=first.id, max_output_tokens=3, temperature=0
    )
    chat = client.chat.completions.create(
        model="tiny",
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": _text(first)},
            {"role": "user", "content": "and again"},
        ],
        max_tokens=3,
        temperature=0,
    )
    assert second.previous_response_id == first.id
    assert second.usage is not None and chat.usage is not None
    assert second.usage.input_tokens == chat.usage.prompt_tokens  # the earlier turn is in its prompt
    assert _text(second) == chat.choices[0].message.content


def test_bad_bodies_are_400s_naming_the_field(http: httpx2.Client) -> None:
    def post(**body: Any) -> httpx2.Response:
        return http.post("/v1/responses", json={"model": "tiny", "input": "hi", **body})

    assert "frobnicate" in assert_error(post(frobnicate=1), 400, "frobnicate", "unknown_field")
    message = assert_error(post(tools=[{"type": "web_search"}, TOOL, {"type": "file_search"}]), 400, "tools")
    assert "web_search" in message and "file_search" in message
    assert_error(post(input=5), 400, "input")
    assert_error(post(input=[]), 400, "input")
    assert "item_reference" in assert_error(post(input=[{"type": "item_reference", "id": "x"}]), 400, "input")
    assert_error(post(input=[{"role": "robot", "content": "hi"}]), 400, "input")
    assert_error(post(input=[{"role": "user", "content": [{"type": "input_audio"}]}]), 400, "input")
    assert "max_output_tokens" in assert_error(post(max_output_tokens=-1), 400, "max_output_tokens")
    assert_error(post(temperature="hot"), 400, "temperature")
    assert_error(post(text={"format": {"type": "xml"}}), 400, "text")
    assert_error(post(tool_choice={"type": "file_search"}), 400, "tool_choice")
    assert_error(post(store="yes"), 400, "store")
    assert_error(post(metadata={"k": 1}), 400, "metadata")
    assert_error(post(reasoning={"effort": "enormous"}), 400, "reasoning")
    assert_error(post(stream="yes"), 400, "stream")
    assert_error(post(input=[{"role": "assistant", "content": "alone"}, {"role": "system", "content": "x"}]), 400,
                 "input")  # fmt: skip
    assert_error(http.post("/v1/responses", json=[1]), 400)
    r = post(previous_response_id="resp_nothing")
    assert_error(r, 404, "previous_response_id", "not_found")
    assert_error(http.get("/v1/responses/resp_nothing"), 404, None, "not_found")
    assert_error(http.delete("/v1/responses/resp_nothing"), 404, None, "not_found")
    assert_error(http.post("/v1/responses/resp_nothing", json={}), 405)
    assert_error(http.get("/v1/responses/a/b"), 404, None, "not_found")


def test_a_field_of_the_wrong_type_is_named_by_its_place(http: httpx2.Client) -> None:
    """The envelope of a /v1/responses body is typed (responses_input.ResponsesEnvelope): a wrong item is
    named by its place, and a field Ember knows but ignores (include, user) is still of its type (they
    were taken whatever they were)."""
    cases = [
        ({"include": ["file_search_call.results", 1]}, "include", "include[1] must be a string (not the integer 1)."),
        ({"user": 5}, "user", "user must be a string (not the integer 5)."),
        ({"instructions": ["Be brief."]}, "instructions", "instructions must be a string (not an array)."),
        ({"truncation": "sometimes"}, "truncation", "truncation must be auto or disabled (not 'sometimes')."),
        ({"previous_response_id": ""}, "previous_response_id",
         "previous_response_id must be a response's id (not '')."),
        ({"store": "yes"}, "store", "store must be true or false (not 'yes')."),
    ]  # fmt: skip
    for fields, param, message in cases:
        response = http.post("/v1/responses", json={"model": "tiny", "input": "hi", **fields})
        assert assert_error(response, 400, param) == message


def test_text_format_is_the_chat_routes_response_format(tools: tuple[ToolBackend, openai.OpenAI]) -> None:
    backend, client = tools
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    fmt: Any = {"type": "json_schema", "name": "n", "schema": schema, "strict": True}
    response = client.responses.create(model="tools", input="a number", text={"format": fmt})
    assert response.text is not None and response.text.format.type == "json_schema"
    wanted = {"type": "json_schema", "json_schema": {"name": "n", "schema": schema, "strict": True}}
    assert backend.params[-1].response_format == wanted
    client.responses.create(model="tools", input="a number", text={"format": {"type": "json_object"}})
    assert backend.params[-1].response_format == {"type": "json_object"}
    client.responses.create(model="tools", input="words", text={"format": {"type": "text"}})
    assert backend.params[-1].response_format is None


def test_the_store_keeps_the_newest_within_its_bounds() -> None:
    store = ResponseStore(max_kept=2, max_bytes=10_000)
    for name in ("a", "b", "c"):
        store.put({"id": name}, [{"role": "user", "content": name}])
    with pytest.raises(ApiError):
        store.get("a")
    assert store.get("c").conversation == ({"role": "user", "content": "c"},)
    store.put({"id": "big"}, [{"role": "user", "content": "x" * 20_000}])  # over the whole store: not kept
    with pytest.raises(ApiError):
        store.get("big")
    assert store.get("b") and store.get("c")


def test_the_request_log_counts_a_response_as_a_generation() -> None:
    """The window lists a generation once, from the engine's report with its metrics (api_control.py)."""
    assert HttpExchange(0.0, "POST", "/v1/responses", 200, "127.0.0.1", 0.1).generation
    assert not HttpExchange(0.0, "GET", "/v1/responses/resp_1", 200, "127.0.0.1", 0.1).generation


# ----- a thinking model: its reasoning item

THINKING_TEMPLATE = CHATML_TEMPLATE.replace("'<|im_start|>assistant\n'", "'<|im_start|>assistant\n<think>\n'")


@pytest.fixture(scope="module")
def think_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[openai.OpenAI]:
    spec = TinySpec(think_tokens=True, chat_template=THINKING_TEMPLATE,
                    script=says("▁hello", "▁world", "</think>", "▁Ember", "!", "</s>"))  # fmt: skip
    path = write_tiny_model(tmp_path_factory.mktemp("think") / "tiny-think.gguf", spec)
    service = EngineService()
    server = ApiServer(service, ServerConfig(port=0))
    try:
        load_blocking(service, LoadConfig(path, n_ctx=512, threads=1), "think")
        server.start()
        with openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=WAIT_S) as c:
            yield c
    finally:
        server.stop()
        service.close()


def test_a_thinking_models_reasoning_item(think_client: openai.OpenAI) -> None:
    response = think_client.responses.create(model="think", input="hi", max_output_tokens=12)
    chat = think_client.chat.completions.create(
        model="think", messages=[{"role": "user", "content": "hi"}], max_tokens=12
    )
    reasoning, message = response.output
    assert reasoning.type == "reasoning" and reasoning.content is not None
    assert reasoning.content[0].text == chat.choices[0].message.reasoning_content == " hello world"  # type: ignore[attr-defined]
    assert message.type == "message" and _text(response) == chat.choices[0].message.content == " Ember!"
    assert response.status == "completed" and response.usage is not None and chat.usage is not None
    assert response.usage.output_tokens_details.reasoning_tokens == 3
    assert chat.usage.completion_tokens_details is not None
    assert chat.usage.completion_tokens_details.reasoning_tokens == 3
    with think_client.responses.stream(model="think", input="hi", max_output_tokens=12) as stream:
        events = list(stream)
        final = stream.get_final_response()
    thought = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    said = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert (thought, said) == (" hello world", " Ember!")
    assert [item.type for item in final.output] == ["reasoning", "message"] and final.output_text == " Ember!"
    # the next turn does not send the thoughts back: the history is the answer, as a chat client's
    more = think_client.responses.create(model="think", input="and?", previous_response_id=response.id)
    again = think_client.chat.completions.create(model="think", messages=[
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": " Ember!"},
        {"role": "user", "content": "and?"}])  # fmt: skip
    assert more.usage is not None and again.usage is not None
    assert more.usage.input_tokens == again.usage.prompt_tokens


# ----- a function tool's round trip, on a scripted model


@pytest.fixture(scope="module")
def tools_setup() -> Iterator[tuple[ToolBackend, ApiServer]]:
    with tool_server() as setup:
        yield setup


@pytest.fixture
def tools(tools_setup: tuple[ToolBackend, ApiServer]) -> Iterator[tuple[ToolBackend, openai.OpenAI]]:
    backend, server = tools_setup
    backend.reset()
    with openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=WAIT_S) as c:
        yield backend, c


def test_a_function_tool_round_trip(tools: tuple[ToolBackend, openai.OpenAI]) -> None:
    backend, client = tools
    backend.preamble = "Let me look."
    first = client.responses.create(model="tools", input=ASK, tools=[TOOL])  # type: ignore[list-item]
    message, call = first.output
    assert message.type == "message" and _text(first) == "Let me look. "
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"} and call.call_id
    assert first.status == "completed" and first.tools[0].name == "get_weather"  # type: ignore[union-attr]
    assert first.usage is not None and first.usage.output_tokens == 3 + CALL_TOKENS
    tool_request = backend.tools[-1]
    assert tool_request is not None and [t.name for t in tool_request.tools] == ["get_weather"]
    result = weather(**json.loads(call.arguments))
    second = client.responses.create(
        model="tools",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": result}],
        tools=[TOOL],  # type: ignore[list-item]
    )
    assert _text(second) == f"Here is what I found: {result}"
    history = backend.requests[-1]
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    assert history[1].content == "Let me look. " and history[1].tool_calls[0].id == call.call_id
    assert history[2].tool_call_id == call.call_id and history[2].content == result


def test_the_round_trip_without_the_store_and_streamed(tools: tuple[ToolBackend, openai.OpenAI]) -> None:
    """The client sends the whole conversation as input items (store: false), and streams the answers."""
    backend, client = tools
    with client.responses.stream(model="tools", input=ASK, tools=[TOOL], store=False) as stream:  # type: ignore[list-item]
        events = list(stream)
        first = stream.get_final_response()
    kinds = [e.type for e in events]
    assert "response.function_call_arguments.delta" in kinds and kinds[-1] == "response.completed"
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    (call,) = first.output
    assert call.type == "function_call" and done.arguments == call.arguments  # type: ignore[union-attr]
    assert json.loads(call.arguments) == {"city": "Paris"}
    result = weather("Paris")
    items: list[Any] = [
        {"role": "user", "content": [{"type": "input_text", "text": ASK}]},
        {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": result},
    ]
    with client.responses.stream(model="tools", input=items, tools=[TOOL]) as stream:  # type: ignore[list-item]
        second = stream.get_final_response()
    assert second.output_text == f"Here is what I found: {result}"
    assert [m.role for m in backend.requests[-1]] == ["user", "assistant", "tool"]
    assert backend.requests[-1][1].tool_calls[0].id == call.call_id
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)
    assert client.responses.retrieve(second.id).output_text == second.output_text


def test_an_input_image_reaches_the_model_as_the_chat_routes_image(tools: tuple[ToolBackend, openai.OpenAI]) -> None:
    backend, client = tools
    image = png((200, 30, 30))
    url = "data:image/png;base64," + base64.b64encode(image.data).decode()
    parts = [{"type": "input_text", "text": "What colour?"}, {"type": "input_image", "image_url": url}]
    client.responses.create(model="tools", input=[{"role": "user", "content": parts}])  # type: ignore[list-item,misc]
    (asked,) = backend.requests[-1]
    assert asked.content == "What colour?" and [i.sha256 for i in asked.images] == [image.sha256]
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="tools", input=[{"role": "user", "content": [
            {"type": "input_image", "file_id": "file-1"}]}])  # type: ignore[list-item,misc]  # fmt: skip
    assert_api_error(refused.value, 400, "input")


def test_a_stream_that_fails_after_it_opened_ends_with_an_error_event(
    serve: Callable[[EngineService, ServerConfig], ApiServer],
) -> None:
    backend = FailsMidway()
    service = EngineService(backend_factory=lambda ref: backend)
    try:
        load_blocking(service, LoadConfig(Path("fails.gguf")), "fails")
        server = serve(service, ServerConfig(port=0))
        with openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=WAIT_S) as client:
            seen: list[str] = []
            with pytest.raises(openai.APIError) as failed:
                for event in client.responses.create(model="fails", input="hi", stream=True):
                    seen.append(event.type)
            assert seen[-1] == "response.output_text.delta" and "response.completed" not in seen
            assert isinstance(failed.value.body, dict) and failed.value.body["code"] == "generation_failed"
            with pytest.raises(openai.InternalServerError):  # (not streamed: the error is the response)
                client.responses.create(model="fails", input="hi")
    finally:
        service.close()


def test_a_chain_of_stored_responses_stays_within_the_store() -> None:
    """Each stored turn keeps the whole conversation: one grown past the store is not kept, and continuing
    it (store true) is a 400 naming previous_response_id — memory never grows with a client's chain."""
    store = ResponseStore(max_bytes=3_000)
    turn = read_turn({"model": "m", "input": "x" * 600}, store)
    store.put({"id": "resp_1", "object": "response"}, [*turn.conversation, {"role": "assistant", "content": "ok"}])
    turn = read_turn({"model": "m", "input": "y" * 600, "previous_response_id": "resp_1"}, store)
    store.put({"id": "resp_2", "object": "response"}, [*turn.conversation, {"role": "assistant", "content": "ok"}])
    with pytest.raises(ApiError) as grown:
        read_turn({"model": "m", "input": "z" * 1_800, "previous_response_id": "resp_2"}, store)
    assert grown.value.status == 400 and grown.value.param == "previous_response_id"
    # without storing, it may go on (nothing more is kept)
    assert read_turn({"model": "m", "input": "z" * 1_800, "previous_response_id": "resp_2", "store": False}, store)
    store.put({"id": "resp_big", "object": "response"}, [{"role": "user", "content": "w" * 5_000}])
    with pytest.raises(ApiError, match="resp_big"):
        store.get("resp_big")  # larger than the whole store: not kept (it would have been, alone, before)
    assert store.get("resp_1") and store.get("resp_2")
