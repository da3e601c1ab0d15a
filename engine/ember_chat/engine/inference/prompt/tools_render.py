"""Tool calls and tool results in the shape chat templates read (the one `transformers` gives them):
an assistant message's `tool_calls` as `[{"id", "type": "function", "function": {"name", "arguments":
{...}}}]`, a result as `{"role": "tool", "content", "tool_call_id"}`, and the conversation adjusted to
what a template can say: templates that read one call per message (Llama 3.x, gpt-oss) get each call
of a parallel turn as its own assistant message followed by its result, Mistral's template, which
refuses any call id but nine letters and digits, gets such ids (the same id → the same one), and a
template with no place for tools (Phi-3.5, Gemma 2, DeepSeek-R1 distills) gets them in the Hermes
format, written into the messages themselves.
"""

from __future__ import annotations

import hashlib
import json
import string
from dataclasses import dataclass
from typing import Any

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.tools import ToolSpec

_ALNUM = string.ascii_letters + string.digits


@dataclass(frozen=True)
class TemplateTraits:
    """What a template's source says about how it renders tool calls."""

    one_call_per_message: bool  # reads message.tool_calls[0] only (Llama 3.x raises on more; gpt-oss drops them)
    nine_char_ids: bool  # Mistral: "Tool call IDs should be alphanumeric strings with length 9!"
    renders_tools: bool  # the template writes the `tools` it is given somewhere

    @classmethod
    def of(cls, source: str) -> TemplateTraits:
        return cls(
            one_call_per_message="tool_calls[0]" in source,
            nine_char_ids="length != 9" in source,
            renders_tools="tools" in source,
        )


def tool_fields(m: ChatMessage) -> dict[str, Any]:
    """The tool keys of a message as templates see it: none at all when it has none (Llama's template
    tests `'tool_calls' in message`)."""
    out: dict[str, Any] = {}
    if m.tool_calls:
        out["tool_calls"] = [call.to_template() for call in m.tool_calls]
    if m.role == "tool" and m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    return out


def template_tools(tools: list[ToolSpec] | None) -> list[dict[str, Any]] | None:
    """`tools=` for the template: OpenAI's function list, None when there are none (templates test `if tools`)."""
    return [t.to_openai() for t in tools] if tools else None


def nine_char_id(call_id: str) -> str:
    """A call id as Mistral's template accepts it: kept when it already is one, else derived from it."""
    if len(call_id) == 9 and all(c in _ALNUM for c in call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode()).digest()
    return "".join(_ALNUM[b % len(_ALNUM)] for b in digest[:9])


def adapt_for_template(
    messages: list[dict[str, Any]], traits: TemplateTraits, tools: list[dict[str, Any]] | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """The template messages and `tools=` adjusted to what the template can render (see the module docstring)."""
    if not traits.renders_tools:
        return hermes_fallback(messages, tools), None
    if traits.nine_char_ids:
        messages = [_with_nine_char_ids(m) for m in messages]
    if traits.one_call_per_message:
        messages = _one_call_per_message(messages)
    return messages, tools


def _with_nine_char_ids(m: dict[str, Any]) -> dict[str, Any]:
    if "tool_calls" not in m and "tool_call_id" not in m:
        return m
    out = dict(m)
    if "tool_calls" in m:
        out["tool_calls"] = [{**call, "id": nine_char_id(call["id"])} for call in m["tool_calls"]]
    if "tool_call_id" in m:
        out["tool_call_id"] = nine_char_id(m["tool_call_id"])
    return out


def _one_call_per_message(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(messages):
        m = messages[i]
        i += 1
        calls = m.get("tool_calls") or []
        if len(calls) < 2:
            out.append(m)
            continue
        results = []
        while i < len(messages) and messages[i]["role"] == "tool":
            results.append(messages[i])
            i += 1
        by_id = {r["tool_call_id"]: r for r in results if "tool_call_id" in r}
        unmatched = [r for r in results if r.get("tool_call_id") not in {c["id"] for c in calls}]
        for n, call in enumerate(calls):
            # the first carries what the model said (and thought) before its calls; the rest only their call
            part = {**m, "tool_calls": [call]} if n == 0 else {"role": "assistant", "content": "", "tool_calls": [call]}
            out.append(part)
            result = by_id.get(call["id"]) or (unmatched.pop(0) if unmatched else None)
            if result is not None:
                out.append(result)
        out.extend(unmatched)
    return out


def hermes_tools_text(tools: list[dict[str, Any]]) -> str:
    """How Ember describes tools to a model whose template has no place for them: the Hermes words
    Qwen2.5's template uses, so the model answers in the `<tool_call>` format Ember then reads."""
    listed = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    return (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        f"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{listed}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within "
        '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n'
        "</tool_call>"
    )


def hermes_call_text(name: str, arguments: Any) -> str:
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


def hermes_fallback(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The conversation for a template that cannot render tools: their description at the end of the
    system prompt (or the start of the first user message when there is none, so a template without a
    system role still takes it), calls as `<tool_call>` text in the answer, results as a user turn of
    `<tool_response>` blocks (Qwen's way)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "tool":
            block = f"<tool_response>\n{m['content']}\n</tool_response>"
            if out and out[-1].get("_results"):
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block, "_results": True})
        elif m.get("tool_calls"):
            calls = "\n".join(
                hermes_call_text(c["function"]["name"], c["function"]["arguments"]) for c in m["tool_calls"]
            )
            rest = {k: v for k, v in m.items() if k != "tool_calls"}
            out.append({**rest, "content": "\n".join(p for p in (m["content"], calls) if p)})
        else:
            out.append(m)
    out = [{k: v for k, v in m.items() if k != "_results"} for m in out]
    if tools:
        text = hermes_tools_text(tools)
        if out and out[0]["role"] == "system":
            out[0] = {**out[0], "content": f"{out[0]['content']}\n\n{text}"}
        else:
            first = next((i for i, m in enumerate(out) if m["role"] == "user"), None)
            if first is None:
                out.insert(0, {"role": "system", "content": text})
            else:
                out[first] = {**out[first], "content": f"{text}\n\n{out[first]['content']}"}
    return out
