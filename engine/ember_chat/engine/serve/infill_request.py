"""llama-server's /infill, as Ember's API server reads and answers it: the text before the cursor
(`input_prefix`), after it (`input_suffix`), other files (`input_extra`: [{filename, text}]) and what is
typed at the cursor (`prompt`), `n_predict` (or `max_tokens`), `stream`, and the completions API's
sampling fields; the answer in llama-server's shape ({content, stop, stop_type, tokens_predicted, …},
streamed as `data:` events of {content, stop}). The prompt itself is the local runtime's
(inference/local/infill.py): the model's fill-in-the-middle tokens around the text."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from ember_chat.engine.core.infill import Infill
from ember_chat.engine.core.logprobs import TokenLogprob
from ember_chat.engine.core.states import StopReason
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.openai.chat_request import CLI_UNKNOWN_FIELDS_ADVICE, KNOWN_BY_KIND, check_known_fields
from ember_chat.engine.openai.responses import Figures, ResponseBuilder, Sample
from ember_chat.engine.openai.tool_wire import ChoiceCalls
from ember_chat.engine.openai.wire_shape import Shape
from ember_chat.engine.serve.api_request import ApiRequest, parse_request
from ember_chat.engine.storage.presets import Preset

_INFILL_FIELDS = {"input_prefix", "input_suffix", "input_extra", "prompt", "n_predict"}
# The completions API's fields that /infill takes too: one answer, its text only (no samples, no
# log-probabilities, no tools, no suffix of its own)
_NOT_HERE = {"suffix", "n", "logprobs", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls",
             "stream_options", "echo", "best_of"}  # fmt: skip
KNOWN = (KNOWN_BY_KIND["completion"] - _NOT_HERE) | _INFILL_FIELDS
MAX_EXTRA = 64  # other files in one request


def parse_infill(
    body: Any,
    allow_unknown: bool = False,
    preset: Preset | None = None,
    unknown_advice: str = CLI_UNKNOWN_FIELDS_ADVICE,
    *,
    speculative: str = "auto",
) -> ApiRequest:
    """Validate an /infill body (400s naming the field), as a completion request with its Infill
    (`speculative`: the server's, parse_request's)."""
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    check_known_fields(body, KNOWN, allow_unknown, unknown_advice)
    body = {k: v for k, v in body.items() if k in KNOWN}  # (the unknown ones, when allowed, are ignored)
    texts = {}
    for name in ("input_prefix", "input_suffix", "prompt"):
        value = body.pop(name, None)
        if value is not None and not isinstance(value, str):
            raise ApiError(400, f"{name} must be a string.", param=name)
        texts[name] = value or ""
    extra = _extra(body.pop("input_extra", None))
    n_predict = body.pop("n_predict", None)
    if n_predict is not None and n_predict != -1:  # (llama-server's -1: until the end, as none given)
        body["max_tokens"] = n_predict  # llama-server's: n_predict over max_tokens
    try:
        req = parse_request("completion", {**body, "prompt": ""}, False, preset, None, unknown_advice,
                            speculative=speculative)  # fmt: skip
    except ApiError as exc:
        if exc.param == "max_tokens" and n_predict is not None:
            message = exc.message.replace("max_tokens", "n_predict")
            raise ApiError(exc.status, message, exc.type, param="n_predict", code=exc.code) from None
        raise
    infill = Infill(texts["input_prefix"], texts["input_suffix"], texts["prompt"], extra)
    return replace(req, kind="infill", prompt=None, infill=infill)


def _extra(raw: Any) -> tuple[tuple[str, str], ...]:
    """`input_extra`: a list of {filename, text} (llama-server names a file without one "tmp")."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ApiError(400, "input_extra must be an array of {filename, text} objects.", param="input_extra")
    if len(raw) > MAX_EXTRA:
        raise ApiError(
            400, f"input_extra has {len(raw):,} files; at most {MAX_EXTRA} are allowed.", param="input_extra"
        )
    out = []
    for i, chunk in enumerate(raw):
        if not isinstance(chunk, dict) or set(chunk) - {"filename", "text"}:
            raise ApiError(400, f"input_extra[{i}] must be an object with filename and text.", param="input_extra")
        name, text = chunk.get("filename", "tmp"), chunk.get("text", "")
        if not isinstance(name, str) or not isinstance(text, str):
            raise ApiError(400, f"input_extra[{i}]: filename and text must be strings.", param="input_extra")
        out.append((name, text))
    return tuple(out)


# Ember's stop reasons → llama-server's stop_type (an answer that ended cleanly: unfinished_error first)
_STOP_TYPES: dict[str, Literal["eos", "word", "limit"]] = {
    StopReason.STOP: "eos",
    StopReason.STOP_STRING: "word",
    StopReason.LENGTH: "limit",
    StopReason.CONTEXT_FULL: "limit",
}


class InfillChunk(Shape):
    """A streamed piece of the answer."""

    index: int
    content: str
    stop: Literal[False]


class InfillAnswer(Shape):
    """The whole answer, or a stream's last event (its content empty)."""

    index: int
    content: str
    id_slot: int
    stop: Literal[True]
    model: str
    stop_type: Literal["eos", "word", "limit", "none"]
    tokens_predicted: int
    tokens_evaluated: int
    tokens_cached: int
    truncated: bool
    ember: dict[str, Any] | None  # Ember's metrics (responses.ResponseBuilder's `ember`)


class InfillResponseBuilder(ResponseBuilder):
    """llama-server's /infill answer: {content, stop: true, stop_type, tokens_predicted, tokens_evaluated,
    model}, with Ember's metrics under `ember`; streamed, {content, stop: false} events and a last one
    with stop true and the same figures."""

    def __init__(self, model: str) -> None:
        super().__init__("infill", model)

    def chunk(
        self,
        text: str | None,
        finish: str | None = None,
        first: bool = False,
        index: int = 0,
        logprobs: list[TokenLogprob] | None = None,
    ) -> dict[str, Any]:
        return InfillChunk(index=index, content=text or "", stop=False).dump()

    def final_chunk(
        self,
        reason: str,
        metrics: Figures | None,
        index: int = 0,
        logprobs: list[TokenLogprob] | None = None,
        calls: ChoiceCalls | None = None,
        answer: str = "",
    ) -> dict[str, Any]:
        return self._whole("", reason, metrics, index)

    def response(self, samples: list[Sample]) -> dict[str, Any]:
        text, reason, metrics, _entries, _calls = samples[0]
        return self._whole(text, reason, metrics, 0)

    def _whole(self, text: str, reason: str, metrics: Figures | None, index: int) -> dict[str, Any]:
        return InfillAnswer(
            index=index, content=text, id_slot=0, stop=True, model=self.model,
            stop_type=_STOP_TYPES.get(reason, "none"),
            tokens_predicted=metrics.output_tokens if metrics else 0,
            tokens_evaluated=metrics.prompt_tokens if metrics else 0,
            tokens_cached=metrics.prompt_tokens_reused if metrics else 0,
            truncated=False, ember=self._ember(metrics),
        ).dump()  # fmt: skip
