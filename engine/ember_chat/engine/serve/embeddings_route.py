"""OpenAI's POST /v1/embeddings on Ember's server, for the model a request names (or the server's own):

    {"input": str | [str, …] | [id, …] | [[id, …], …], "model"?, "encoding_format"?: "float" | "base64",
     "dimensions"?: the model's own only, "user"?: ignored}
    → {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [float, …] | base64}],
       "model", "usage": {"prompt_tokens", "total_tokens"}}

Every vector has unit length (L2), pooled as the model's GGUF says or by the mean of its tokens (a chat
model); base64 is the little-endian float32 bytes that OpenAI's client decodes. The work runs on the
model's engine thread (EngineService.embed), in a context of its own (inference/llama/embeddings.py). An
input that cannot be embedded is a 400 naming it (input[3]). A remote model's inputs go to its server's
own /embeddings (inference/remote/backend.py), its vectors answered as it sends them."""

from __future__ import annotations

import base64
import contextlib
import struct
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from ember_chat.engine.core.embeddings import BadEmbeddingInput, EmbeddingInput, Embeddings
from ember_chat.engine.errors import (
    GenerationError,
    InvalidParameter,
    JobCancelled,
    NoModelLoaded,
    QueueFull,
    RemoteError,
    RemoteNotFound,
    RemoteServerError,
)
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.openai.chat_request import CLI_UNKNOWN_FIELDS_ADVICE, check_known_fields
from ember_chat.engine.serve.model_routing import Served, take_ttl

KNOWN = {"input", "model", "encoding_format", "dimensions", "user"}
MAX_INPUTS = 2048  # OpenAI's limit on one request's inputs
ENCODINGS = ("float", "base64")

Serving = Callable[[str | None, float | None], AbstractContextManager[Served]]


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_inputs(raw: Any) -> list[EmbeddingInput]:
    """`input` as OpenAI takes it: a text, texts, one input's token ids, or several inputs' token ids. A
    400 naming `input` (or `input[i]`) for anything else, an empty one included."""
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        what = "an empty array" if raw == [] else "missing" if raw is None else f"a {type(raw).__name__}"
        raise ApiError(400, f"input must be a string, an array of strings or an array of token ids (not {what}).",
                       param="input")  # fmt: skip
    if all(_is_id(t) for t in raw):
        return [tuple(raw)]  # one input, as token ids
    if len(raw) > MAX_INPUTS:
        raise ApiError(400, f"input has {len(raw):,} items; at most {MAX_INPUTS:,} are embedded at once.",
                       param="input")  # fmt: skip
    out: list[EmbeddingInput] = []
    for i, item in enumerate(raw):
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, list) and all(_is_id(t) for t in item):
            out.append(tuple(item))
        else:
            raise ApiError(400, f"input[{i}] must be a string or an array of token ids.", param="input")
        if not out[-1]:
            raise ApiError(400, f"input[{i}] is empty: there is nothing to embed.", param="input")
    return out


def _encoding(raw: Any) -> str:
    if raw is None:
        return "float"
    if raw not in ENCODINGS:
        raise ApiError(400, f'encoding_format must be "float" or "base64", not {raw!r}.', param="encoding_format")
    return str(raw)


def _dimensions(raw: Any) -> int | None:
    if raw is None:
        return None
    if not _is_id(raw) or raw < 1:
        raise ApiError(400, "dimensions must be a positive whole number.", param="dimensions")
    return int(raw)


def read_body(
    body: Any, known: set[str], allow_unknown: bool, advice: str
) -> tuple[dict[str, Any], str | None, float | None]:
    """(the body, the model it names, how long a model loaded for it stays: `ttl` / `keep_alive`, taken
    out of it); a 400 for a body that is not a JSON object, an unknown field or a model that is not a
    string."""
    ttl = take_ttl(body)  # (not a field of the request itself)
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    check_known_fields(body, known, allow_unknown, advice)
    requested = body.get("model")
    if requested is not None and not isinstance(requested, str):
        raise ApiError(400, "model must be a string.", param="model")
    return body, requested, ttl


def embeddings(
    body: Any, serving: Serving, allow_unknown: bool = False, advice: str = CLI_UNKNOWN_FIELDS_ADVICE
) -> dict[str, Any]:
    """Answer one /v1/embeddings request (the response body, or an ApiError)."""
    body, requested, ttl = read_body(body, KNOWN, allow_unknown, advice)
    inputs = read_inputs(body.get("input"))
    encoding, dimensions = _encoding(body.get("encoding_format")), _dimensions(body.get("dimensions"))
    with serving(requested, ttl) as served:
        result = _embed(served, inputs)
    size = len(result.vectors[0])
    if dimensions is not None and dimensions != size:
        raise ApiError(400, f"dimensions: {served.name}'s embeddings have {size:,} dimensions; other sizes are not "
                       "supported (leave dimensions out).", param="dimensions")  # fmt: skip
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": _encoded(vector, encoding)}
            for i, vector in enumerate(result.vectors)
        ],
        "model": served.name,
        "usage": {"prompt_tokens": result.prompt_tokens, "total_tokens": result.prompt_tokens},
    }


def _embed(served: Served, inputs: list[EmbeddingInput]) -> Embeddings:
    with engine_errors("input"):
        result = served.service.embed(inputs)
    return result


@contextlib.contextmanager
def engine_errors(param: str) -> Iterator[None]:
    """An embeddings or rerank job's errors as the API answers them; `param`: the field naming the
    input it refused (input, documents)."""
    try:
        yield
    except BadEmbeddingInput as exc:
        raise ApiError(400, str(exc), param=param, code="invalid_input") from None
    except InvalidParameter as exc:  # (a reranker, a backend without embeddings)
        raise ApiError(400, str(exc), param="model", code="embeddings_unsupported") from None
    except QueueFull as exc:
        raise ApiError(429, str(exc), "rate_limit_error", code="queue_full") from None
    except NoModelLoaded as exc:
        raise ApiError(503, str(exc), "server_error", code="model_not_loaded") from None
    except JobCancelled as exc:  # (the engine closed before it ran)
        raise ApiError(503, str(exc), "server_error", code="embeddings_cancelled") from None
    except GenerationError as exc:
        raise ApiError(500, str(exc), "server_error", code="embeddings_failed") from None
    except (RemoteNotFound, RemoteServerError) as exc:  # (a remote server without embeddings, or refusing these)
        status = getattr(exc, "status", 404)
        if status < 500 and status != 429:
            raise ApiError(400, str(exc), param="model", code="embeddings_unsupported") from None
        raise ApiError(502, str(exc), "server_error", code="remote_error") from None
    except RemoteError as exc:  # (unreachable, the key refused, a malformed answer)
        raise ApiError(502, str(exc), "server_error", code="remote_error") from None


def refuse_chat(served: Served) -> None:
    """A 400 for a chat, completion, infill, response or message asked of a model that has no chat: an
    embedding model or a reranker (gguf_inspect.model_kind), instead of text generated from its
    encoder's states."""
    model = served.service.model
    kind = model.kind if model is not None else "chat"
    if kind == "embedding":
        raise ApiError(400, f"{served.name} is an embedding model: it has no chat; use /v1/embeddings.",
                       param="model", code="model_has_no_chat")  # fmt: skip
    if kind == "reranker":
        raise ApiError(400, f"{served.name} is a reranker: it has no chat; use /v1/rerank.", param="model",
                       code="model_has_no_chat")  # fmt: skip


def _encoded(vector: list[float], encoding: str) -> list[float] | str:
    if encoding == "float":
        return vector
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
