"""Tools, calls and results through the real chat templates in tests/templates (prompt/templates.py with
tools_render.py): each template puts the tool's name and JSON schema where it describes tools, the
call in its own call format, the result inside its own tool turn; and the call a template shows the
model is the call Ember's parser for that family reads back.

Templates that render tools themselves are compared with transformers' renderings of four tool
conversations (tests/templates/tool_references.json, recorded by make_tool_references.py); for all of
them the facts are also asserted from each template's own text.
"""

from __future__ import annotations

import json
import os
from datetime import datetime

import pytest

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.tools import ToolCall, ToolResult, ToolSpec
from ember_chat.engine.inference.calls.parsing import ToolFormat, parse_tool_calls, tool_format_for
from ember_chat.engine.inference.prompt.templates import BuiltinTemplate, JinjaTemplate, render_chat
from ember_chat.engine.inference.prompt.tools_render import nine_char_id
from ember_chat.engine.openai.tool_wire import tool_spec_from_openai
from tests.helpers.tool_templates import ENTRIES, HERE

WEATHER = ToolSpec(
    "get_weather",
    "Current weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}}, "required": ["city"]},
)
CALL = ToolCall("call_8f2Kq", "get_weather", {"city": "Paris"})
RESULT = '{"temperature": 18, "sky": "clear"}'
ASK = [ChatMessage("system", "Be brief."), ChatMessage("user", "Weather in Paris?")]
ROUND_TRIP = [
    *ASK,
    ChatMessage("assistant", "", tool_calls=(CALL,)),
    ChatMessage.from_tool_result(ToolResult(CALL.id, CALL.name, RESULT)),
]


TOOL_REFERENCES = json.loads((HERE / "tool_references.json").read_text(encoding="utf-8"))


def ember_conversation(conversation: list[dict]) -> list[ChatMessage]:
    """transformers' chat-template shape → Ember's messages."""
    out = []
    for m in conversation:
        calls = tuple(
            ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in m.get("tool_calls", [])
        )
        out.append(ChatMessage(m["role"], m["content"], tool_calls=calls, tool_call_id=m.get("tool_call_id")))
    return out


@pytest.mark.parametrize(
    "case", TOOL_REFERENCES["cases"], ids=[f"{c['template']}-{c['conversation']}" for c in TOOL_REFERENCES["cases"]]
)
def test_renders_as_transformers_does(case: dict) -> None:
    entry = ENTRIES[case["template"]]
    source = (HERE / entry["file"]).read_text(encoding="utf-8")
    pinned = datetime.fromisoformat(TOOL_REFERENCES["date"])
    t = JinjaTemplate(source, entry["bos"], entry["eos"], clock=lambda: pinned)
    tools = [tool_spec_from_openai(raw) for raw in TOOL_REFERENCES["tools"]]
    messages = ember_conversation(TOOL_REFERENCES["conversations"][case["conversation"]])
    prompt, notice = render_chat(t, messages, BuiltinTemplate("chatml"), tools=tools)
    assert notice is None
    if t.traits.one_call_per_message and "as_single_calls" in case:
        # Llama 3.x refuses several calls in one message, gpt-oss drops all but the first: Ember sends
        # each call as its own message, followed by its result
        assert prompt == case["as_single_calls"]
    else:
        assert "error" not in case
        assert prompt == case["expected"]


def test_the_tool_references_cover_the_templates_that_render_tools() -> None:
    covered = {c["template"] for c in TOOL_REFERENCES["cases"]}
    assert covered == {n for n in ENTRIES if template(n).traits.renders_tools}
    assert covered >= {"qwen2.5", "qwen3", "llama-3.1", "llama-3.2", "mistral-nemo", "gpt-oss"}


def template(name: str) -> JinjaTemplate:
    entry = ENTRIES[name]
    source = (HERE / entry["file"]).read_text(encoding="utf-8")
    return JinjaTemplate(source, entry["bos"], entry["eos"], clock=lambda: datetime(2026, 1, 15))


def render(name: str, messages: list[ChatMessage]) -> str:
    prompt, notice = render_chat(template(name), messages, BuiltinTemplate("chatml"), tools=[WEATHER])
    assert notice is None or "system prompt" in notice, notice  # Gemma 2 has no system role
    return prompt


# where each template describes the tool (its schema as the template writes it), and its tool turn
HERMES_TOOLS = json.dumps(WEATHER.to_openai(), ensure_ascii=False)
DESCRIBED = {
    "qwen2.5": HERMES_TOOLS,
    "qwen3": HERMES_TOOLS,
    "llama-3.1": json.dumps(WEATHER.to_openai(), indent=4),
    "llama-3.2": json.dumps(WEATHER.to_openai(), indent=4),
    "mistral-nemo": "[AVAILABLE_TOOLS][" + HERMES_TOOLS + "][/AVAILABLE_TOOLS]",
    "gpt-oss": "// Current weather in a city.\ntype get_weather = (_: {\n// City name\ncity: string,\n}) => any;",
    "gemma-4": 'declaration:get_weather{description:<|"|>Current weather in a city.<|"|>',
    # no place for tools in these: Ember's Hermes description
    "smollm3": "<tools>\n" + HERMES_TOOLS + "\n</tools>",
    "phi-3.5": "<tools>\n" + HERMES_TOOLS + "\n</tools>",
    "gemma-2": "<tools>\n" + HERMES_TOOLS + "\n</tools>",
    "deepseek-r1-distill": "<tools>\n" + HERMES_TOOLS + "\n</tools>",
}
TOOL_TURN = {
    "qwen2.5": f"<|im_start|>user\n<tool_response>\n{RESULT}\n</tool_response><|im_end|>",
    "qwen3": f"<|im_start|>user\n<tool_response>\n{RESULT}\n</tool_response><|im_end|>",
    "llama-3.1": f"<|start_header_id|>ipython<|end_header_id|>\n\n{json.dumps(RESULT)}<|eot_id|>",
    "llama-3.2": f"<|start_header_id|>ipython<|end_header_id|>\n\n{json.dumps(RESULT)}<|eot_id|>",
    "mistral-nemo": f'[TOOL_RESULTS]{{"content": {RESULT}, "call_id": "{nine_char_id(CALL.id)}"}}[/TOOL_RESULTS]',
    "gpt-oss": (
        f"<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{json.dumps(RESULT)}<|end|>"
    ),
    "gemma-4": "<|tool_response>response:get_weather{",
    "smollm3": f"<|im_start|>user\n<tool_response>\n{RESULT}\n</tool_response><|im_end|>",
    "phi-3.5": f"<|user|>\n<tool_response>\n{RESULT}\n</tool_response><|end|>",
    "gemma-2": f"<start_of_turn>user\n<tool_response>\n{RESULT}\n</tool_response><end_of_turn>",
    "deepseek-r1-distill": f"<｜User｜><tool_response>\n{RESULT}\n</tool_response>",
}


def test_every_stored_template_is_covered() -> None:
    assert set(DESCRIBED) == set(TOOL_TURN) == set(ENTRIES)


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_the_tool_is_described_where_the_template_puts_it(name: str) -> None:
    prompt = render(name, ASK)
    assert DESCRIBED[name] in prompt
    without = render_chat(template(name), ASK, BuiltinTemplate("chatml"))[0]
    assert "get_weather" not in without  # no tools: nothing about them


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_a_result_goes_back_in_the_templates_tool_turn(name: str) -> None:
    prompt = render(name, ROUND_TRIP)
    assert TOOL_TURN[name] in prompt


@pytest.mark.parametrize("name", sorted(n for n in ENTRIES if n != "gemma-4"))
def test_the_call_a_template_shows_is_the_call_ember_reads(name: str) -> None:
    """What follows the assistant's turn opening once the call is in the history is what the model
    learns to write: parsed with the template's family format, it is the same call."""
    fmt = tool_format_for((HERE / ENTRIES[name]["file"]).read_text(encoding="utf-8"), "x")
    asked = render(name, ASK)
    answered = render(name, ROUND_TRIP)
    same = os.path.commonprefix([asked, answered])  # noqa: RUF071 (text, not paths)
    # from the end of the last marker the two share: DeepSeek's prompt opens <think> where the call was
    written = answered[max(same.rfind(c) for c in ">]\n") + 1 :]
    parsed = parse_tool_calls(written, fmt, [WEATHER])
    assert [(c.name, c.arguments) for c in parsed.calls][:1] == [("get_weather", {"city": "Paris"})], written


def test_parallel_calls_render_in_every_template() -> None:
    """Llama 3.x refuses two calls in one message and gpt-oss keeps only the first: each call becomes
    its own assistant message followed by its result, in order."""
    second = ToolCall("call_Zz9", "get_weather", {"city": "Lyon"})
    messages = [
        *ASK,
        ChatMessage("assistant", "", tool_calls=(CALL, second)),
        ChatMessage.from_tool_result(ToolResult(second.id, second.name, '"rain"')),  # results out of order
        ChatMessage.from_tool_result(ToolResult(CALL.id, CALL.name, '"sun"')),
    ]
    for name in ENTRIES:
        prompt = render(name, messages)
        assert "Paris" in prompt and "Lyon" in prompt and "sun" in prompt and "rain" in prompt, name
    llama = render("llama-3.1", messages)
    assert llama.index('"Paris"') < llama.index('\\"sun\\"') < llama.index('"Lyon"') < llama.index('\\"rain\\"')
    oss = render("gpt-oss", messages)
    assert oss.count("<|start|>assistant to=functions.get_weather") == 2


def test_mistral_gets_nine_character_ids_that_pair_call_and_result() -> None:
    prompt = render("mistral-nemo", ROUND_TRIP)
    short = nine_char_id(CALL.id)
    assert len(short) == 9 and short.isalnum() and short != CALL.id
    assert f'"id": "{short}"' in prompt and f'"call_id": "{short}"' in prompt
    assert nine_char_id("abcDEF123") == "abcDEF123"


def test_a_built_in_format_describes_tools_in_hermes_text() -> None:
    prompt = BuiltinTemplate("chatml").render(ROUND_TRIP, tools=[WEATHER])
    assert "<tools>\n" + HERMES_TOOLS + "\n</tools>" in prompt
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in prompt
    assert f"<|im_start|>user\n<tool_response>\n{RESULT}\n</tool_response><|im_end|>" in prompt
    parsed = parse_tool_calls(prompt.split("<|im_start|>assistant\n")[1], ToolFormat.HERMES, [WEATHER])
    assert [c.arguments for c in parsed.calls] == [{"city": "Paris"}]


def test_without_tools_the_prompt_is_unchanged() -> None:
    """The plain references (test_real_templates) are not touched by the tools argument."""
    for name in ENTRIES:
        t = template(name)
        assert render_chat(t, ASK, BuiltinTemplate("chatml"), tools=None) == render_chat(
            t, ASK, BuiltinTemplate("chatml")
        )
