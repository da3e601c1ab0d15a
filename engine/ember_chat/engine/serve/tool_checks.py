"""What the API server checks of a request's tools before it queues it for the local model, whose
grammar holds the model's calls to their schemas."""

from __future__ import annotations

from ember_chat.engine.core.tools import ToolRequest
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.inference.calls.formats import ToolFormat
from ember_chat.engine.inference.calls.grammar import ToolGrammar
from ember_chat.engine.inference.grammar.limits import check_grammar_limits
from ember_chat.engine.inference.grammar.structured import schema_grammar
from ember_chat.engine.openai.api_error import ApiError


def check_tool_schemas(tools: ToolRequest) -> None:
    """For a local model, whose grammar holds calls to their schemas: each tool's parameters can be
    turned into a grammar (else a 400 naming the tool, before the request waits in the queue), and
    the grammar of all the calls together is within grammar_limits' limits (many large schemas)."""
    for i, spec in enumerate(tools.tools):
        try:
            schema_grammar(spec.parameters)
        except InvalidParameter as exc:
            message = f"tools[{i}] ({spec.name}): its parameters cannot hold the model's calls to them. {exc}"
            raise ApiError(400, message, param="tools") from None
    try:  # (the Hermes form: the other families' add a few literals around the same rules)
        check_grammar_limits(ToolGrammar(ToolFormat.HERMES, tools).grammar())
    except InvalidParameter as exc:
        raise ApiError(400, f"The tools together cannot hold the model's calls to them. {exc}", param="tools") from None
