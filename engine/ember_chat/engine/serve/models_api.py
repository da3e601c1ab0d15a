"""The models a server offers, for programs: `GET /v1/models` (OpenAI's list: the server's own model
first, then every other installed model with its state, memory and context) and Ember's REST for the
pool — `GET /api/models` (the table), `POST /api/models/load` and `POST /api/models/unload` with
`{"model": name}` (load: also `ttl` / `keep_alive`).

A configured remote connection's models are in the same table as `remote:<connection>/<model id>` with
their `connection`: state "remote" while no engine holds them open, "loaded" while one does (after a
request, until its TTL), no memory; a request naming one is served through Ember.

Without a pool (the window's server today) the list is the server's one model, as before."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import Field

from ember_chat.engine.errors import EmberError
from ember_chat.engine.inference.pool.pool import ModelNotFound, ModelPool, ModelState
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.openai.chat_request import CLI_UNKNOWN_FIELDS_ADVICE
from ember_chat.engine.openai.models_list import ModelCard, ModelList, model_card, models_answer
from ember_chat.engine.openai.typed_body import Body, Must, read_body
from ember_chat.engine.serve.model_routing import own_names, serving, take_ttl


def _row(state: ModelState) -> dict[str, Any]:
    return {
        "name": state.name,
        "state": state.state,
        "loaded_by": state.loaded_by,
        "memory_bytes": state.memory_bytes,
        "n_ctx": state.n_ctx,
        "busy": state.busy,
        "idle_s": None if state.idle_s is None else round(state.idle_s, 1),
        "ttl_s": None if state.ttl_s is None or math.isinf(state.ttl_s) else state.ttl_s,
        "connection": state.connection,
    }


def _states(service: EngineService, pool: ModelPool, alias: str | None) -> list[ModelState]:
    """The pool's table with the server's own model first (under the name it answers to)."""
    own = own_names(service, alias) if service.model is not None else ()
    states = pool.states()
    first = [s for s in states if s.name in own]
    return first + [s for s in states if s.name not in own]


def models_list(service: EngineService, pool: ModelPool | None, alias: str | None) -> dict[str, Any]:
    """GET /v1/models."""
    model = service.model
    own = own_names(service, alias)[0] if model is not None else None
    if pool is None:
        return models_answer(own, model.n_ctx or 0 if model is not None else 0)
    data: list[ModelCard] = []
    shown = set(own_names(service, alias))  # (the server's own model is listed once, first)
    states = _states(service, pool, alias)
    if own is not None and model is not None:
        memory = next((s.memory_bytes for s in states if s.name in shown), 0)
        data.append(model_card(own, max_model_len=model.n_ctx or 0, state="loaded", memory_bytes=memory))
    for state in states:
        if state.name in shown:
            continue
        shown.add(state.name)
        more: dict[str, Any] = {"state": state.state, "memory_bytes": state.memory_bytes}
        if state.connection is not None:
            more["connection"] = state.connection
        if state.n_ctx:
            more["max_model_len"] = state.n_ctx
        data.append(model_card(state.name, **more))
    return ModelList(object="list", data=data).dump()


def _pool(pool: ModelPool | None) -> ModelPool:
    if pool is None:
        raise ApiError(404, "This server serves one model; it loads no others on demand.", code="not_found")
    return pool


class ModelBody(Body):
    """The body of a load or an unload: {"model": "<name>"} (a load's ttl / keep_alive taken out first)."""

    model: Annotated[str, Field(min_length=1), Must("a model's name (a non-empty string)")]


def models_table(service: EngineService, pool: ModelPool | None, alias: str | None) -> dict[str, Any]:
    """GET /api/models."""
    return {"models": [_row(s) for s in _states(service, _pool(pool), alias)]}


def load_model(
    service: EngineService,
    pool: ModelPool | None,
    alias: str | None,
    body: object,
    allow_unknown: bool = False,
    advice: str = CLI_UNKNOWN_FIELDS_ADVICE,
) -> dict[str, Any]:
    """POST /api/models/load: load it now (as a request naming it would), keep it for its TTL."""
    ttl = take_ttl(body)
    name = read_body(ModelBody, body, allow_unknown, advice).model
    with serving(service, _pool(pool), alias, name, ttl) as served:
        shown = served.name
    row = next((s for s in _states(service, _pool(pool), alias) if s.name == shown), None)
    return {"model": _row(row) if row is not None else {"name": shown, "state": "loaded"}}


def unload_model(
    pool: ModelPool | None, body: object, allow_unknown: bool = False, advice: str = CLI_UNKNOWN_FIELDS_ADVICE
) -> dict[str, Any]:
    """POST /api/models/unload."""
    name = read_body(ModelBody, body, allow_unknown, advice).model
    target = _pool(pool)
    try:
        target.unload(name)
    except ModelNotFound as exc:
        raise ApiError(404, str(exc), param="model", code="model_not_found") from None
    except EmberError as exc:  # the server's own model, one answering requests, one not loaded
        raise ApiError(409, str(exc), param="model") from None
    return {"model": {"name": name, "state": "not loaded"}}
