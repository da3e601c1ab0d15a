"""Turning a conversation into prompt text: which chat template, and how it is rendered.

Order of choice: the user's override; the GGUF's own `tokenizer.chat_template` (Jinja); a llama.cpp
built-in template chosen by architecture (e.g. Gemma 3 files without a template still get the Gemma
turn format); ChatML.
"""

from __future__ import annotations

import ctypes
import functools
import json
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

import jinja2
import jinja2.ext
import jinja2.sandbox
import llama_cpp

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.reasoning import split_thinking
from ember_chat.engine.core.tools import ToolSpec
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.inference.prompt.control_text import ControlText
from ember_chat.engine.inference.prompt.tools_render import (
    TemplateTraits,
    adapt_for_template,
    hermes_fallback,
    template_tools,
    tool_fields,
)

# Architectures whose chat format is unambiguous, mapped to llama.cpp's built-in template names.
BUILTIN_BY_ARCH = {
    "gemma": "gemma",
    "gemma2": "gemma",
    "gemma3": "gemma",
    "gemma3n": "gemma",
    "qwen2": "chatml",
    "qwen2moe": "chatml",
    "qwen3": "chatml",
    "qwen3moe": "chatml",
    "phi3": "phi3",
    "command-r": "command-r",
    "cohere2": "command-r",
    "exaone": "exaone3",
    "granite": "granite",
    "llama4": "llama4",
    "smollm3": "chatml",
    "gpt-oss": "gpt-oss",
}


class ChatTemplate(Protocol):
    name: str
    thinking_switch: bool  # the template can turn a reasoning model's thinking on and off
    # the model's control tokens, kept out of the content (see control_text.py); None: content as it is
    guard: ControlText | None

    def render(
        self, messages: list[ChatMessage], thinking: bool | None = None, tools: list[ToolSpec] | None = None
    ) -> str:
        """Prompt text for `messages`, ending with the assistant's turn opening; `thinking`: the
        template's thinking switch, where it has one (None: its default); `tools`: the functions the
        model may call, described the template's own way."""
        ...


@functools.cache
def builtin_template_names() -> tuple[str, ...]:
    n = llama_cpp.llama_chat_builtin_templates(None, 0)
    arr = (ctypes.c_char_p * n)()
    llama_cpp.llama_chat_builtin_templates(arr, n)
    return tuple(arr[i].decode() for i in range(n))


def template_input(
    messages: list[ChatMessage], tools: list[ToolSpec] | None, guard: ControlText | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """The messages and tools as templates read them, with the text that came from people, files and
    tools defused by `guard` (what the template adds after this, such as the Hermes wrapping of calls
    and results, is the template's own)."""
    shaped, listed = [template_message(m) for m in messages], template_tools(tools)
    if guard is None:
        return shaped, listed
    return guard.defuse(shaped), guard.defuse(listed)


class BuiltinTemplate:
    """One of llama.cpp's own templates (`llama_chat_apply_template`)."""

    def __init__(self, name: str, guard: ControlText | None = None) -> None:
        if name not in builtin_template_names():
            raise InvalidParameter(
                f"unknown chat template {name!r}; built-in ones are: {', '.join(builtin_template_names())}."
            )
        self.name = name
        self.guard = guard

    thinking_switch = False

    def render(
        self, messages: list[ChatMessage], thinking: bool | None = None, tools: list[ToolSpec] | None = None
    ) -> str:
        # llama.cpp's built-in formats have no place for tools: they are described, called and answered
        # in Hermes text inside the messages (the format tool_calls reads back for such models)
        shaped = hermes_fallback(*template_input(messages, tools, self.guard))
        arr = (llama_cpp.llama_chat_message * len(shaped))()
        keep = []  # the C array points into these bytes objects
        for i, m in enumerate(shaped):
            role, content = m["role"].encode(), m["content"].encode()
            keep.append((role, content))
            arr[i].role = role
            arr[i].content = content
        size = max(256, 2 * sum(len(r) + len(c) + 32 for r, c in keep))
        for _ in range(2):
            buf = ctypes.create_string_buffer(size)
            n = llama_cpp.llama_chat_apply_template(self.name.encode(), arr, len(shaped), True, buf, size)
            if n < 0:
                raise InvalidParameter(f"chat template {self.name!r} cannot render this conversation.")
            if n <= size:
                return buf.raw[:n].decode("utf-8", errors="replace")
            size = n + 1
        raise InvalidParameter(f"chat template {self.name!r} output did not fit its buffer.")


def template_message(m: ChatMessage) -> dict[str, Any]:
    """A message as templates see it: an earlier answer's thinking is not part of its content; it is
    offered as `reasoning_content` (and as `thinking`, the name gpt-oss's template reads), which a
    template uses only if it wants it (most drop it). Tool calls and results as tools_render says."""
    if m.role != "assistant":
        return {"role": m.role, "content": m.content, **tool_fields(m)}
    split = split_thinking(m.content)
    out: dict[str, Any] = {"role": m.role, "content": split.answer}
    if split.thinking:
        out["reasoning_content"] = out["thinking"] = split.thinking
    return {**out, **tool_fields(m)}


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None, sort_keys: bool = False
) -> str:
    """JSON as chat templates expect it: plain `json.dumps`, not Jinja's HTML-escaping filter."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def template_environment(clock: Callable[[], datetime]) -> jinja2.Environment:
    """The sandbox chat templates are written for (the one `transformers.apply_chat_template` and
    llama.cpp's server give them): trim/lstrip blocks, `{% break %}`/`{% continue %}`, a `tojson`
    that does not escape HTML, `raise_exception`, and `strftime_now` for templates that print
    today's date (Llama 3.2, gpt-oss)."""
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: clock().strftime(fmt)
    return env


class JinjaTemplate:
    """A Jinja chat template (from the GGUF or the user), rendered in a sandbox."""

    def __init__(
        self,
        source: str,
        bos_token: str,
        eos_token: str,
        name: str = "gguf",
        clock: Callable[[], datetime] = datetime.now,
        guard: ControlText | None = None,
    ) -> None:
        try:
            self._template = template_environment(clock).from_string(source)
        except jinja2.TemplateSyntaxError as exc:
            raise InvalidParameter(f"the chat template has a syntax error: {exc}") from exc
        self._bos = bos_token
        self._eos = eos_token
        self.name = name
        self.guard = guard
        self.thinking_switch = "enable_thinking" in source
        self.traits = TemplateTraits.of(source)
        self._clock = clock
        self._dated = "date_string" in source  # (Llama 3.x: today's date, as llama.cpp's server gives it)

    def render(
        self, messages: list[ChatMessage], thinking: bool | None = None, tools: list[ToolSpec] | None = None
    ) -> str:
        switch: dict[str, Any] = {"enable_thinking": thinking} if thinking is not None and self.thinking_switch else {}
        if self._dated:
            switch["date_string"] = self._clock().strftime("%d %b %Y")
        shaped, listed = template_input(messages, tools, self.guard)
        shaped, tools_arg = adapt_for_template(shaped, self.traits, listed)
        try:
            return self._template.render(
                messages=shaped,
                tools=tools_arg,
                documents=None,
                add_generation_prompt=True,
                bos_token=self._bos,
                eos_token=self._eos,
                **switch,
            )
        except jinja2.TemplateError as exc:
            raise InvalidParameter(f"the chat template rejected this conversation: {exc}") from exc


class UnusableTemplate:
    """A template that failed to compile: every render says why (and `render_chat` falls back)."""

    name = "unusable"
    thinking_switch = False

    def __init__(self, problem: str, guard: ControlText | None = None) -> None:
        self.problem = problem
        self.guard = guard  # (for the built-in format used in its place)

    def render(
        self, messages: list[ChatMessage], thinking: bool | None = None, tools: list[ToolSpec] | None = None
    ) -> str:
        raise InvalidParameter(self.problem)


def choose_template(
    architecture: str,
    gguf_template: str | None,
    bos_token: str,
    eos_token: str,
    override: str | None = None,
    guard: ControlText | None = None,
) -> ChatTemplate:
    """Pick the template for a model; `override` is a built-in name or a Jinja template text; `guard`:
    the model's control tokens, kept out of the content."""
    if override:
        if "{" in override:
            return JinjaTemplate(override, bos_token, eos_token, name="custom", guard=guard)
        return BuiltinTemplate(override, guard)
    if gguf_template:
        return JinjaTemplate(gguf_template, bos_token, eos_token, guard=guard)
    return builtin_for(architecture, guard)


def builtin_for(architecture: str, guard: ControlText | None = None) -> BuiltinTemplate:
    """llama.cpp's built-in format for this architecture, ChatML when it has none (a model file
    without a template, and the fallback for one whose template fails)."""
    builtin = BUILTIN_BY_ARCH.get(architecture)
    return BuiltinTemplate(builtin if builtin and builtin in builtin_template_names() else "chatml", guard)


def merge_system(messages: list[ChatMessage]) -> list[ChatMessage]:
    """The system prompt put at the start of the first user message (for templates without a system role)."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    rest = [m for m in messages if m.role != "system"]
    for i, m in enumerate(rest):
        if m.role == "user":
            rest[i] = ChatMessage("user", f"{system}\n\n{m.content}")
            break
    return rest


def render_chat(
    template: ChatTemplate,
    messages: list[ChatMessage],
    fallback: ChatTemplate,
    thinking: bool | None = None,
    tools: list[ToolSpec] | None = None,
) -> tuple[str, str | None]:
    """The prompt, and what the user should know when the model's own template could not render it:
    a template that refuses a system role gets the system prompt inside the first user message; a
    template that fails otherwise is replaced by `fallback` (a plain built-in format, tools in Hermes text)."""
    try:
        return template.render(messages, thinking, tools), None
    except InvalidParameter as exc:
        problem = str(exc)
    if any(m.role == "system" for m in messages):
        try:
            text = template.render(merge_system(messages), thinking, tools)
        except InvalidParameter:
            pass
        else:
            return text, (
                "This model's chat template has no system role, so the system prompt was put at the start of "
                "the first message."
            )
    return fallback.render(messages, tools=tools), (
        f"This model's chat template could not be used ({problem}); Ember used the {fallback.name} "
        "chat format instead. Answers may be less good: pick another template in the model's settings if so."
    )
