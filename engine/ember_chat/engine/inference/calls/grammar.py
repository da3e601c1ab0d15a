"""Grammars that hold a tool call to its tool's JSON schema (what llama.cpp's lazy grammar does for
llama-server): the model writes freely until a call opens, then every token of the call must fit the
format of its family and the arguments the schema of the tool it names.

`ToolGrammar(fmt, request).grammar(opener, lead)` is the GBNF of the rest of an answer from a call's
opening words on: `lead` (text that must come first: the part of a token before the opener, which the
runtime takes back and lets the grammar write again), the opener, the call, and, when parallel calls are
allowed, more calls — MAX_CALLS in all at most; nothing after them but the end of the turn. A named
`tool_choice` is one call of that tool (OpenAI: "call exactly one specific function"). The arguments'
rules come from llama-cpp-python's JSON-schema converter (see grammar/structured.py), one rule per tool.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ember_chat.engine.core.tools import ToolRequest, ToolSpec
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.inference.calls.formats import STARTS, ToolFormat
from ember_chat.engine.inference.grammar.structured import schema_grammar

_RULE = re.compile(r"^([A-Za-z0-9-]+) ::= ", re.M)
# The calls one answer may make. Without a bound a small model under a forced grammar repeats its call
# until max_tokens (the chat starter: 6 calls, the last cut, finish_reason "length"); after the last
# one the grammar allows only the end of the turn.
MAX_CALLS = 8


def gbnf_literal(text: str) -> str:
    """`text` as a GBNF string literal."""
    out = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return '"' + out.replace("\t", "\\t") + '"'


class ToolGrammar:
    """The grammars of one request's calls (built once per answer: the schemas are converted here,
    so a schema the converter cannot use is refused before anything is generated)."""

    def __init__(self, fmt: ToolFormat, request: ToolRequest, *, mistral_args: bool = False) -> None:
        """`mistral_args`: the model's template writes Mistral's newer `[TOOL_CALLS]name[ARGS]{…}`."""
        self.fmt = fmt
        self.request = request
        self.mistral_args = mistral_args
        named = request.choice not in ("auto", "required")
        tools = [t for t in request.tools if not named or t.name == request.choice]
        self.tools: list[ToolSpec] = tools
        self.parallel = request.parallel and not named
        # One converter run for all the tools' arguments: each becomes the rule `toolargsN`.
        defs: dict[str, Any] = {}
        wrapper = {
            "type": "object",
            "properties": {f"toolargs{i}": _hoisted(t.parameters, f"toolargs{i}", defs) for i, t in enumerate(tools)},
            "required": [f"toolargs{i}" for i in range(len(tools))],
            "$defs": defs,
        }
        try:
            converted = schema_grammar(wrapper)
        except InvalidParameter as exc:
            raise InvalidParameter(f"A tool's parameters cannot be used to constrain its calls: {exc}") from exc
        rules = [line for line in converted.splitlines() if line.strip() and not line.startswith("root ::=")]
        self._shared = "\n".join(rules)
        names = set(_RULE.findall(converted))
        missing = [f"toolargs{i}" for i in range(len(tools)) if f"toolargs{i}" not in names]
        if missing:  # (the converter names each property's rule after it; checked, not assumed)
            raise InvalidParameter("The tools' parameters could not be turned into a grammar.")

    @property
    def default_opener(self) -> str:
        """How a call opens when the answer must be a call from its first token."""
        if self.fmt is ToolFormat.LLAMA3:
            return "{"
        return STARTS[self.fmt][0]

    def grammar(self, opener: str | None = None, lead: str = "") -> str:
        opener = self.default_opener if opener is None else opener
        lines = [f"tool-call ::= {self._call_rule(opener)}"]
        more = ""  # (Llama 3.x and gpt-oss end the turn after one call; Mistral's array holds several)
        if self.parallel and (self.fmt is ToolFormat.HERMES or (self.fmt is ToolFormat.MISTRAL and self.mistral_args)):
            # (named rules: a repetition of an inline group counts the rules inside it, one per tool)
            more = f" (tool-sep tool-next){{0,{MAX_CALLS - 1}}}"
            lines.append(f"tool-next ::= {self._call_rule(self.default_opener)}")
        lines = [
            f"root ::= {gbnf_literal(lead) + ' ' if lead else ''}tool-call{more} tool-tail",
            *lines,
            "tool-sep ::= [ \\n]{0,2}",
            "tool-tail ::= [ \\n]{0,2}",
            self._shared,
        ]
        return "\n".join(lines) + "\n"

    def _call_rule(self, opener: str) -> str:
        alternatives = [self._one_call(opener, i, t) for i, t in enumerate(self.tools)]
        if self.fmt is ToolFormat.MISTRAL and not self.mistral_args:
            objects = " | ".join(self._json_object(i, t, "arguments") for i, t in enumerate(self.tools))
            items = f"({objects})" + (f' (", " ({objects})){{0,{MAX_CALLS - 1}}}' if self.parallel else "")
            return f'{gbnf_literal(opener)} "[" {items} "]"'
        return "(" + " | ".join(alternatives) + ")"

    def _json_object(self, i: int, tool: ToolSpec, key: str) -> str:
        return (
            f'"{{" "\\"name\\": " {gbnf_literal(json.dumps(tool.name))} ", " '
            f"{gbnf_literal(json.dumps(key) + ': ')} toolargs{i} " + '"}"'
        )

    def _one_call(self, opener: str, i: int, tool: ToolSpec) -> str:
        name = gbnf_literal(tool.name)
        if self.fmt is ToolFormat.HERMES:
            return f'{gbnf_literal(opener)} "\\n" {self._json_object(i, tool, "arguments")} "\\n</tool_call>"'
        if self.fmt is ToolFormat.LLAMA3:
            prefix = "" if opener == "{" else gbnf_literal(opener) + " "
            return prefix + self._json_object(i, tool, "parameters")
        if self.fmt is ToolFormat.MISTRAL:  # the newer form (the array form is _call_rule's)
            return f'{gbnf_literal(opener)} {name} "[ARGS]" toolargs{i}'
        # gpt-oss: the recipient after the channel (or in the header, before it), JSON arguments, <|call|>
        if opener.startswith("<|channel|>"):
            return f'{gbnf_literal(opener)} {name} " <|constrain|>json<|message|>" toolargs{i} "<|call|>"'
        return (
            f'{gbnf_literal(opener)} {name} "<|channel|>commentary <|constrain|>json<|message|>" toolargs{i} "<|call|>"'
        )


def _hoisted(schema: Any, name: str, defs: dict[str, Any]) -> Any:
    """A tool's schema moved under the property `name` of one wrapper schema: its own definitions
    (`$defs`, `definitions`: what pydantic and FastMCP write) go to the wrapper's `$defs` as
    `name-KEY`, and every `$ref` to them (or to the schema itself, `#`) is rewritten to match."""

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        out = {}
        for key, value in node.items():
            if key in ("$defs", "definitions") and isinstance(value, dict):
                for sub, definition in value.items():
                    defs[f"{name}-{sub}"] = walk(definition)
            elif key == "$ref" and isinstance(value, str):
                out[key] = _ref(value, name)
            else:
                out[key] = walk(value)
        return out

    return walk(schema)


def _ref(ref: str, name: str) -> str:
    for local in ("#/$defs/", "#/definitions/"):
        if ref.startswith(local):
            return f"#/$defs/{name}-{ref[len(local) :]}"
    if ref == "#":
        return f"#/properties/{name}"
    return ref
