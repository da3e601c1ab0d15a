"""What the remote backend sends: the messages in OpenAI's shape (images as content parts, an
assistant's tool calls, tool results) and the body of a generation request (sampling, the servers'
common extensions, structured output, tools)."""

from __future__ import annotations

from typing import Any

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.reasoning import answer_only
from ember_chat.engine.core.tools import ToolRequest
from ember_chat.engine.openai.content_parts import wire_content
from ember_chat.engine.openai.tool_wire import tool_fields


def wire_messages(messages: list[ChatMessage], continuing: bool) -> list[dict[str, Any]]:
    """Earlier answers go back without their thinking (a final one being continued, as it is); an
    assistant's calls as `tool_calls` (content null when it said nothing besides), a tool result with
    the `tool_call_id` it answers."""
    sent: list[dict[str, Any]] = []
    for m in messages:
        entry: dict[str, Any] = {"role": m.role, "content": wire_content(answer_only(m.content), m.images)}
        if m.tool_calls:
            entry["tool_calls"] = [c.to_openai() for c in m.tool_calls]
            if not entry["content"]:
                entry["content"] = None
        if m.role == "tool":
            entry["tool_call_id"] = m.tool_call_id
        sent.append(entry)
    if continuing:
        sent[-1]["content"] = messages[-1].content
    return sent


def request_body(
    model: str, base: dict[str, Any], params: SamplingParams, tools: ToolRequest | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        **base,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": params.max_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        # Not in OpenAI's API, understood by vLLM, SGLang, llama.cpp, LM Studio, Ollama:
        "top_k": params.top_k,
        "min_p": params.min_p,
        # Always sent: a server's own default (llama-cpp-python: 1.1) would change the answer.
        "repeat_penalty": params.repeat_penalty,  # llama.cpp, LM Studio, Ollama
        "repetition_penalty": params.repeat_penalty,  # vLLM, SGLang
    }
    if params.seed is not None:
        body["seed"] = params.seed
    if params.stop:
        body["stop"] = list(params.stop)
    if params.ignore_eos:  # llama.cpp's server, vLLM, Ember's (others ignore it and may stop early)
        body["ignore_eos"] = True
    for name in ("presence_penalty", "frequency_penalty"):  # OpenAI's; sent only when on
        if getattr(params, name):
            body[name] = getattr(params, name)
    if params.logit_bias:  # OpenAI's form (token ids as strings), which vLLM and llama.cpp's server read too
        body["logit_bias"] = {str(token): bias for token, bias in params.logit_bias}
    if params.response_format is not None:  # OpenAI's structured output: the server builds its grammar
        body["response_format"] = params.response_format
    if params.grammar is not None:  # GBNF: llama.cpp's server (and Ember's) extension
        body["grammar"] = params.grammar
    if tools is not None and tools.tools:  # vLLM, llama-server (--jinja), Ollama, Ember's own take them
        body.update(tool_fields(tools))
    return body
