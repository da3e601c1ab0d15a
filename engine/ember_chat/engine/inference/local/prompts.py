"""The local runtime's chat prompts for the loaded model: its chat template (chosen from the file's, an
override or a built-in format), a chat rendered and fitted to the context (text, or text and images),
and the tool turn that reads its calls in its family's format."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import llama_cpp

from ember_chat.engine.core import reasoning
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.reasoning import MarkerNormalizer, prompt_opens_thinking, split_thinking
from ember_chat.engine.core.tools import ToolRequest, ToolSpec
from ember_chat.engine.errors import ImagesNotSupported, InvalidParameter
from ember_chat.engine.inference.calls.formats import tool_format_for
from ember_chat.engine.inference.calls.turn import ToolTurn
from ember_chat.engine.inference.prompt.control_text import ControlText
from ember_chat.engine.inference.prompt.fitting import fit_to_context, plan_chat
from ember_chat.engine.inference.prompt.templates import (
    ChatMessage,
    ChatTemplate,
    UnusableTemplate,
    builtin_for,
    choose_template,
    render_chat,
)
from ember_chat.engine.models.gguf_inspect import ModelInfo

if TYPE_CHECKING:  # vision.py loads libmtmd: imported once a model has a projector
    from ember_chat.engine.inference.llama.vision import VisionContext, VisionPrompt


def model_template(
    llm: llama_cpp.Llama, info: ModelInfo, override: str | None, guard: ControlText | None = None
) -> ChatTemplate:
    """The chat template for the model loaded into `llm` (`override`: the user's choice of template;
    `guard`: the model's control tokens, kept out of the content)."""
    model = llm._model

    def text_of(token_id: int) -> str:
        return model.token_get_text(token_id) if token_id >= 0 else ""

    try:
        return choose_template(
            info.architecture,
            info.chat_template,
            text_of(llm.token_bos()),
            text_of(llm.token_eos()),
            override,
            guard,
        )
    except InvalidParameter as exc:
        if override:  # the user's own choice: say what is wrong with it
            raise
        # the file's template does not even compile: chat still works, in a built-in format
        return UnusableTemplate(str(exc), guard)


_THINKING_MARKERS = re.compile(f"({re.escape(reasoning.OPEN)}|{re.escape(reasoning.CLOSE)})")


def continued_text(prefix: str, guard: ControlText | None) -> str:
    """An answer being continued, as it goes after the generation prompt: defused like any content (an
    API client writes it), except the thinking markers Ember stores answers with, which stay the
    model's own tokens where they are (the answer goes on inside or after its thinking)."""
    if guard is None or not prefix:
        return prefix
    return "".join(
        p if p in (reasoning.OPEN, reasoning.CLOSE) else guard.defuse(p) for p in _THINKING_MARKERS.split(prefix)
    )


# a rendering tried while fitting: its text, tokens, images (if any) and the template's fallback notice
Rendered = tuple[str, list[int], "VisionPrompt | None", str | None]


@dataclass(frozen=True)
class ChatPrompt:
    text: str  # the rendered prompt (with the answer being continued, if any)
    tokens: list[int]  # with placeholders where the images go, if any
    vision: VisionPrompt | None  # the prompt's images (its owner closes it)
    notice: str | None  # why the template's built-in fallback was used, if it was
    dropped: int  # messages left out to fit the context
    prefix: str  # an answer being continued (after an interruption), else ""
    offered: list[ToolSpec] | None  # the tools the model is given (None: none)
    held: bytes = b""  # the first bytes of a character the answer being continued stopped inside: `tokens`
    # end with their tokens (not in `text`), and the answer's first token completes the character

    def markers(self) -> MarkerNormalizer:
        """The answer's thinking markers, put in canonical form as it streams."""
        if self.prefix:  # continuing an answer: inside its thinking if that had not ended
            return MarkerNormalizer(thinking=split_thinking(self.prefix).open)
        return MarkerNormalizer(opened_by_prompt=prompt_opens_thinking(self.text))


def chat_prompt(
    messages: list[ChatMessage],
    params: SamplingParams,
    tools: ToolRequest | None,
    template: ChatTemplate,
    info: ModelInfo,
    vision: VisionContext | None,
    prompt_tokens: Callable[[str], list[int]],
    n_ctx: int,
    *,
    trim: bool = True,
    stopped: Callable[[], bool] = lambda: False,
    byte_tokens: Callable[[bytes], list[int]] = lambda _held: [],
) -> ChatPrompt:
    """`messages` rendered with `template` (with `vision`'s images, if any) and fitted to `n_ctx` with
    room for the answer (see fit_to_context for `trim` and `stopped`); `prompt_tokens(text)` tokenizes
    a rendered text prompt (the template's markers as control tokens, the defused content as text);
    `byte_tokens(data)` gives the tokens of those bytes one by one ([] when the vocabulary lacks one: the
    held bytes of an answer being continued are then left out, and its next character written anew)."""
    plan = plan_chat(messages, params, template.thinking_switch, tools)
    if any(m.images for m in plan.messages) and vision is None:
        raise ImagesNotSupported(
            f"{info.name} cannot see images: it was loaded without a projector (mmproj) file. "
            "Load a vision model with its projector, or remove the images."
        )
    fallback = builtin_for(info.architecture, template.guard)
    prefix = continued_text(plan.prefix, template.guard)
    # (with images, mtmd tokenizes the text itself: a cut character is written anew there)
    held_tokens = byte_tokens(plan.held) if plan.held and not any(m.images for m in plan.messages) else []
    held = plan.held if held_tokens else b""
    unfreed: list[Rendered] = []  # renderings not yet given to `discard` (or returned)

    def render(kept: list[ChatMessage]) -> tuple[Rendered, int]:
        if any(m.images for m in kept):
            assert vision is not None
            text, prompt, notice = vision.prompt(template, kept, fallback, plan.thinking, prefix, plan.offered)
            unfreed.append((text, prompt.tokens, prompt, notice))
            return unfreed[-1], len(prompt.tokens)
        rendered, notice = render_chat(template, kept, fallback, plan.thinking, plan.offered)
        tokens = prompt_tokens(rendered + prefix) + held_tokens
        return (rendered + prefix, tokens, None, notice), len(tokens)

    def discard(rendered: Rendered) -> None:  # (a rendering not used: its images' positions are freed)
        if rendered[2] is not None:
            unfreed[:] = [r for r in unfreed if r is not rendered]
            rendered[2].close()

    reserve = min(params.max_tokens, max(1, n_ctx // 4))
    try:
        fitted = fit_to_context(plan.messages, render, n_ctx, reserve, trim=trim, stopped=stopped, discard=discard)
    except BaseException:
        while unfreed:
            discard(unfreed[-1])
        raise
    text, tokens, prompt, notice = fitted.rendered
    return ChatPrompt(text, tokens, prompt, notice, fitted.dropped, plan.prefix, plan.offered, held)


def tool_turn_for(
    info: ModelInfo, template_override: str | None, tools: ToolRequest | None, markers: MarkerNormalizer
) -> ToolTurn:
    """How this model's calls are read and held to their schemas (its family's format)."""
    assert tools is not None
    source = template_override or info.chat_template
    fmt = tool_format_for(source, info.architecture)
    if fmt is None:
        raise InvalidParameter(
            f"{info.name}'s chat template writes tool calls in a form Ember cannot read yet, "
            "so it cannot be given tools. Turn the tools off for this chat, or use another model."
        )
    return ToolTurn(fmt, tools, markers, mistral_args="[ARGS]" in (source or ""))
