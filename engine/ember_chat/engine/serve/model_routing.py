"""Which engine serves a request: the model a request names, loaded when it is not (the model pool), or
the server's own model (the window's, or `serve --model`'s) when it names that one or none.

The server's own model is checked first and without the pool (no library scan on the common path); any
other name goes to the pool, whose errors become the API's: an unknown model a 404 naming those that
exist, one that does not fit the memory budget a 503 saying what it needs and what is free, a load that
fails a 500 with llama.cpp's reason — each for this request only.

A request may say how long its model stays loaded once idle: LM Studio's `ttl` (seconds) or Ollama's
`keep_alive` (seconds, or "5m", "1h"; 0 unloads it when idle, a negative one keeps it). They are taken
out of the body before the route reads it (`take_ttl`)."""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ember_chat.engine.errors import EmberError, ModelFileError
from ember_chat.engine.inference.pool.pool import ModelDoesNotFit, ModelLoadFailed, ModelNotFound, ModelPool
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.openai.api_error import ApiError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
KEEP = float("inf")  # a negative keep_alive: stay loaded


@dataclass(frozen=True)
class Served:
    service: EngineService
    name: str  # the model's name in answers


def take_ttl(body: Any) -> float | None:
    """Remove `ttl` / `keep_alive` from a JSON body and return how long (s) its model stays loaded once
    idle (None: neither given). A value that is not a duration is a 400 naming the field."""
    if not isinstance(body, dict):
        return None
    ttl: float | None = None
    for field in ("ttl", "keep_alive"):
        if field not in body:
            continue
        value = body.pop(field)
        if isinstance(value, bool) or value is None:
            raise ApiError(400, f"{field} must be a number of seconds.", param=field)
        if isinstance(value, int | float):
            try:
                seconds = float(value)
            except OverflowError:  # (an integer of hundreds of digits: longer than any time to live)
                seconds = math.inf if value > 0 else -math.inf
            if math.isnan(seconds):  # (Python's JSON reads NaN)
                raise ApiError(400, f"{field} must be a number of seconds, not NaN.", param=field)
            ttl = KEEP if seconds < 0 else seconds
            continue
        match = _DURATION.match(value) if isinstance(value, str) else None
        if match is None:
            raise ApiError(400, f"{field} must be a number of seconds or a duration such as \"5m\", not {value!r}.",
                           param=field)  # fmt: skip
        ttl = float(match.group(1)) * _UNIT_S[match.group(2)]
    return ttl


def own_names(service: EngineService, alias: str | None) -> tuple[str, ...]:
    """The names the server's own model answers to: the server's alias, the name it was loaded by, its file."""
    model = service.model
    names = [alias, service.model_alias, model.name if model else None]
    return tuple(n for n in names if n)


@contextlib.contextmanager
def serving(
    service: EngineService, pool: ModelPool | None, alias: str | None, requested: str | None, ttl_s: float | None
) -> Iterator[Served]:
    """The engine for a request naming `requested` (None or "": the server's own model), held for the
    whole request (a model in use is never unloaded under it)."""
    names = own_names(service, alias)
    if service.model is not None and (not requested or requested in names):
        yield Served(service, names[0])
        return
    if not requested or pool is None:
        if service.model is None:
            hint = ' Name one in the request\'s "model".' if pool is not None else " Load one in the window first."
            raise ApiError(503, f"No model is loaded in Ember.{hint}", "server_error", code="model_not_loaded")
        raise ApiError(404, f"The model {requested!r} does not exist; this server serves {names[0]!r}.",
                       param="model", code="model_not_found")  # fmt: skip
    held = contextlib.ExitStack()
    try:
        leased = held.enter_context(pool.lease(requested, ttl_s))
    except ModelNotFound as exc:
        raise ApiError(404, str(exc), param="model", code="model_not_found") from None
    except ModelDoesNotFit as exc:
        raise ApiError(503, str(exc), "server_error", param="model", code="model_does_not_fit") from None
    except (ModelLoadFailed, ModelFileError) as exc:
        raise ApiError(500, str(exc), "server_error", param="model", code="model_load_failed") from None
    except EmberError as exc:  # (the pool is closing)
        raise ApiError(503, str(exc), "server_error", code="model_not_loaded") from None
    with held:
        yield Served(leased, leased.model_alias or requested)
