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
from typing import Annotated, Any, Literal, cast

from pydantic import Discriminator, Field, JsonValue, Tag

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
from ember_chat.engine.openai.chat_request import CLI_UNKNOWN_FIELDS_ADVICE
from ember_chat.engine.openai.typed_body import Body, Must, read_body
from ember_chat.engine.openai.vector_shapes import Embedding, EmbeddingList, EmbeddingUsage
from ember_chat.engine.serve.model_routing import Served, take_ttl

MAX_INPUTS = 2048  # OpenAI's limit on one request's inputs
INPUT = "a string, an array of strings or an array of token ids"

Serving = Callable[[str | None, float | None], AbstractContextManager[Served]]


def _is_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _input_shape(raw: object) -> str | None:
    """Which of `input`'s shapes a value is (so that an error is the one of that shape: input[3])."""
    if isinstance(raw, str):
        return "text"
    if isinstance(raw, list) and raw and all(_is_id(t) for t in raw):
        return "ids"  # one input, as token ids
    return "inputs" if isinstance(raw, list) else None


# `input` as OpenAI takes it: a text, texts, one input's token ids, or several inputs' token ids
EmbeddingsInput = Annotated[
    Annotated[str, Tag("text")]
    | Annotated[list[int], Tag("ids")]
    | Annotated[list[Annotated[str | list[int], Must("a string or an array of token ids")]], Field(min_length=1),
                Tag("inputs")],
    Discriminator(_input_shape),
    Must(INPUT),
]  # fmt: skip


class EmbeddingsBody(Body):
    model: str | None = None  # (first: a model that is not a string was refused before the rest was read)
    input: EmbeddingsInput
    encoding_format: Literal["float", "base64"] | None = None
    dimensions: Annotated[int | None, Field(ge=1), Must("a positive whole number")] = None
    user: JsonValue = None  # (accepted, not used)


def read_inputs(raw: str | list[int] | list[str | list[int]]) -> list[EmbeddingInput]:
    """A typed `input` as the engine's inputs; a 400 naming `input` for too many or an empty one
    (input[3])."""
    if isinstance(raw, str):
        raw = [raw]
    if all(_is_id(t) for t in raw):
        return [tuple(cast("list[int]", raw))]  # one input, as token ids
    if len(raw) > MAX_INPUTS:
        raise ApiError(400, f"input has {len(raw):,} items; at most {MAX_INPUTS:,} are embedded at once.",
                       param="input")  # fmt: skip
    out: list[EmbeddingInput] = [
        item if isinstance(item, str) else tuple(item) for item in cast("list[str | list[int]]", raw)
    ]
    for i, item in enumerate(out):
        if not item:
            raise ApiError(400, f"input[{i}] is empty: there is nothing to embed.", param="input")
    return out


def embeddings(
    body: object, serving: Serving, allow_unknown: bool = False, advice: str = CLI_UNKNOWN_FIELDS_ADVICE
) -> dict[str, Any]:
    """Answer one /v1/embeddings request (the response body, or an ApiError)."""
    ttl = take_ttl(body)  # (how long a model loaded for it stays: not a field of the request itself)
    request = read_body(EmbeddingsBody, body, allow_unknown, advice)
    inputs = read_inputs(request.input)
    encoding, dimensions = request.encoding_format or "float", request.dimensions
    with serving(request.model, ttl) as served:
        result = _embed(served, inputs)
    size = len(result.vectors[0])
    if dimensions is not None and dimensions != size:
        raise ApiError(400, f"dimensions: {served.name}'s embeddings have {size:,} dimensions; other sizes are not "
                       "supported (leave dimensions out).", param="dimensions")  # fmt: skip
    return EmbeddingList(
        object="list",
        data=[
            Embedding(object="embedding", index=i, embedding=_encoded(vector, encoding))
            for i, vector in enumerate(result.vectors)
        ],
        model=served.name,
        usage=EmbeddingUsage(prompt_tokens=result.prompt_tokens, total_tokens=result.prompt_tokens),
    ).dump()


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
