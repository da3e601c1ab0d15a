"""A tool call being written, read from its text so far: the tool's name once the model has written it
whole, and its arguments so far (the text after the name, as the model writes it: partial JSON). It
lets the window show "writing a call to git_status…" while a long call streams (a call's text is in
no Token), and names a call the answer ended inside. Any family's call (tool_formats.STARTS): a JSON
object's "name" (Hermes, Llama 3, a Mistral array), `<function=NAME>` (Qwen3-Coder's XML),
`to=functions.NAME` (gpt-oss), `[TOOL_CALLS]NAME[ARGS]` (Mistral v11), `NAME.call(` (Llama 3 built-in)."""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass

from ember_chat.engine.inference.local.stop_strings import partial_suffix

_NAMES = (
    re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"'),
    re.compile(r"<function=([^>\s]+)>"),
    re.compile(r"to=functions\.([\w.-]+?)(?=\s|<\||$)"),
    re.compile(r"\[TOOL_CALLS\]\s*([\w.-]+)\s*\[ARGS\]"),
    re.compile(r"<\|python_tag\|>\s*([A-Za-z_][\w.-]*)\.call\("),
)
# where the arguments start, in the same families: what follows is shown as it comes
_ARGUMENTS = re.compile(r'"(?:arguments|parameters)"\s*:\s*|\[ARGS\]|<\|message\|>|<function=[^>\s]+>\n?|\.call\(')
_ENDS = ("</tool_call>", "<|call|>", "<|eom_id|>", "<|eot_id|>")


@dataclass(frozen=True)
class CallPreview:
    name: str  # "" until the model has written it whole
    arguments: str  # the arguments' text so far ("" before they start)


def call_preview(text: str) -> CallPreview:
    """`text`: a call's text so far, from its opener (`<tool_call>`, `[TOOL_CALLS]`, …) on."""
    name = ""
    found = [m for m in (p.search(text) for p in _NAMES) if m is not None]
    if found:
        first = min(found, key=lambda m: m.start())
        name = first.group(1)
        if first.re is _NAMES[0]:
            with contextlib.suppress(json.JSONDecodeError):  # (a JSON string: its escapes)
                name = json.loads(f'"{name}"')
    start = _ARGUMENTS.search(text)
    arguments = text[start.end() :] if start is not None else ""
    for end in _ENDS:
        arguments = arguments.split(end, 1)[0]
    return CallPreview(name, _held_back(arguments).rstrip())


# a special token written in pieces, at the end: "<|", "<|eo", "<|eom_id|" (shown once it is whole or text)
_PARTIAL_SPECIAL = re.compile(r"<\|[\w.-]*\|?$")


def _held_back(arguments: str) -> str:
    """The arguments without a closing tag the model is still writing at their end: "</tool" of
    "</tool_call>", "<|ca" of "<|call|>" (a model without them as one token writes them in pieces; the
    preview showed "</tool" under the call). What turns out not to be a tag shows with the next piece."""
    cut = partial_suffix(arguments, _ENDS)
    if cut:
        return arguments[:-cut]
    partial = _PARTIAL_SPECIAL.search(arguments)
    return arguments[: partial.start()] if partial is not None else arguments
