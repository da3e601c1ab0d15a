"""Tool-call formats of the model families, and what every parser shares: the format a model
writes (`tool_format_for`), the words that open a call (`call_triggers`, for the lazy grammar), a call
checked against the tools it was given (`check_call`), and the parsed pieces (`ParsedChunk`,
`InvalidCall`). The parsers themselves are parsing.py's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from ember_chat.engine.core.json_schema import schema_errors
from ember_chat.engine.core.tools import CutShort, InvalidCall, ToolCall, ToolSpec, new_call_id
from ember_chat.engine.inference.calls.preview import call_preview
from ember_chat.engine.inference.prompt.tools_render import TemplateTraits


class ToolFormat(StrEnum):
    HERMES = "hermes"
    LLAMA3 = "llama3"
    MISTRAL = "mistral"
    GPT_OSS = "gpt-oss"


def tool_format_for(template_source: str | None, architecture: str) -> ToolFormat | None:
    """The call format a model writes, from its chat template (what its tool turns look like), else
    its architecture. Hermes for a template with no place for tools (Ember describes them in Hermes
    words then, see tools_render); None for a template that renders tools in a format Ember cannot
    read yet (Gemma 4's `<|tool_call>call:NAME{…}`): tools must not be offered to that model."""
    source = template_source or ""
    if "<|channel|>" in source or architecture == "gpt-oss":
        return ToolFormat.GPT_OSS
    if "[TOOL_CALLS]" in source:
        return ToolFormat.MISTRAL
    if "<|start_header_id|>ipython" in source or "<|python_tag|>" in source:
        return ToolFormat.LLAMA3
    if "<tool_call>" in source or not TemplateTraits.of(source).renders_tools:
        return ToolFormat.HERMES
    return None


def call_triggers(fmt: ToolFormat) -> tuple[str, ...]:
    """The words that open a call in this format: where a lazy grammar (llama.cpp's, which waits for a
    trigger) starts holding the model to the call's shape. A Llama 3.x call may also be a bare JSON
    object, whose opening words are given with and without the space JSON allows after `:`."""
    if fmt is ToolFormat.LLAMA3:
        return ("<|python_tag|>", '{"name":', '{"name" :', '{"type":', '{"type" :')
    return STARTS[fmt]


@dataclass(frozen=True)
class ParsedChunk:
    text: str = ""  # the answer's text that is not a call (thinking included, in place)
    calls: tuple[ToolCall, ...] = ()
    invalid: tuple[InvalidCall, ...] = ()


def check_call(
    name: Any, arguments: Any, raw: str, tools: Sequence[ToolSpec], call_id: str | None = None
) -> ToolCall | InvalidCall:
    """A call as the model wrote it, checked against the tools it was given."""
    call_id = call_id if isinstance(call_id, str) and call_id else new_call_id()
    name = name if isinstance(name, str) else ""
    if isinstance(arguments, str):  # some models write the arguments as a JSON string
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return InvalidCall(ToolCall(call_id, name, {}, raw), "the call's arguments are not valid JSON.")
    spec = next((t for t in tools if t.name == name), None)
    if spec is None:
        known = ", ".join(t.name for t in tools) or "none"
        return InvalidCall(ToolCall(call_id, name, {}, raw), f"there is no tool named {name!r} (tools: {known}).")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return InvalidCall(ToolCall(call_id, name, {}, raw), "the call's arguments must be a JSON object.")
    errors = schema_errors(arguments, spec.parameters, "arguments")
    if errors:
        return InvalidCall(ToolCall(call_id, name, arguments, raw), "; ".join(errors) + ".")
    return ToolCall(call_id, name, arguments, raw)


def with_unique_id(call: ToolCall | InvalidCall, seen: set[str]) -> ToolCall | InvalidCall:
    """`call`, with a new id when its answer already used the one the model wrote (two calls sharing
    one could not each get their result back); `seen` gains its id."""
    plain = call.call if isinstance(call, InvalidCall) else call
    if plain.id in seen:
        plain = replace(plain, id=new_call_id())
        call = replace(call, call=plain) if isinstance(call, InvalidCall) else plain
    seen.add(plain.id)
    return call


def broken_call(raw: str, why: str) -> InvalidCall:
    return InvalidCall(ToolCall(new_call_id(), "", {}, raw), why)


CUT_SHORT = "the tool call was cut short (the answer ended inside it)."


def cut_short(opener: str, body: str) -> tuple[list, int, bool]:
    """A reader's result for a call the answer ended inside: all of `body`, as one CutShort (named when
    the model had written the tool's name)."""
    name = call_preview(opener + body).name
    return [CutShort(ToolCall(new_call_id(), name, {}, opener + body), CUT_SHORT)], len(body), False


STARTS = {
    ToolFormat.HERMES: ("<tool_call>",),
    ToolFormat.LLAMA3: ("<|python_tag|>",),
    ToolFormat.MISTRAL: ("[TOOL_CALLS]",),
    ToolFormat.GPT_OSS: (
        "<|channel|>commentary to=functions.",
        "<|channel|>analysis to=functions.",
        " to=functions.",
        "to=functions.",
    ),
}
# Harmony's headers around plain text (a commentary preamble, the final answer) are not part of it.
DROPS = {
    ToolFormat.GPT_OSS: ("<|channel|>commentary<|message|>", "<|channel|>final<|message|>", "<|end|>", "<|return|>")
}
