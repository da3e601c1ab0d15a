"""openai/typed_body.py: a request body read as a pydantic model answers the 400s Ember's hand-written
parsers answer (unknown fields named with the server's advice, or ignored with --allow-unknown-fields; a
wrong type named by its field and its place, with what it must be and what it was)."""

from __future__ import annotations

from typing import Annotated, Literal

import pytest
from pydantic import Field

from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.openai.chat_body import BODY_BY_KIND
from ember_chat.engine.openai.chat_request import CLI_UNKNOWN_FIELDS_ADVICE, KNOWN_BY_KIND, check_known_fields
from ember_chat.engine.openai.typed_body import Body, Must, Nested, read_body
from ember_chat.engine.serve.models_api import load_model, unload_model

DOC = 'a string or an object with a "text" string'


class Doc(Nested):
    text: str


class Sample(Body):
    name: str
    flag: bool = False
    count: Annotated[int | None, Must("a positive whole number")] = None
    ids: list[int] = Field(default_factory=list)
    docs: Annotated[list[Annotated[str | Doc, Must(DOC)]], Must("an array")] = Field(default_factory=list)
    mode: Literal["float", "base64"] | None = None
    inputs: list[Annotated[str | list[int], Must("a string or token ids")]] = Field(default_factory=list)
    size: int = 1


def refused(body: object, allow_unknown: bool = False) -> ApiError:
    with pytest.raises(ApiError) as info:
        read_body(Sample, body, allow_unknown, "ask nicely")
    assert info.value.status == 400
    return info.value


def test_a_valid_body_is_typed() -> None:
    body = read_body(Sample, {"name": "a", "flag": True, "ids": [1, 2], "docs": ["x", {"text": "y", "title": "z"}]})
    assert body.name == "a" and body.flag and body.ids == [1, 2] and body.size == 1
    assert body.docs == ["x", Doc(text="y")]  # (a nested object's other fields ignored)


def test_unknown_fields_are_the_hand_parsers_400_or_ignored() -> None:
    error = refused({"name": "a", "zeta": 1, "alpha": 2})
    with pytest.raises(ApiError) as same:
        check_known_fields({"name": "a", "zeta": 1, "alpha": 2}, {"name"}, False, "ask nicely")
    assert (error.message, error.param, error.code) == (same.value.message, "alpha", "unknown_field")
    assert "alpha, zeta" in error.message and "ask nicely" in error.message
    assert read_body(Sample, {"name": "a", "zeta": 1}, allow_unknown=True).name == "a"
    # ignoring them still reads the rest strictly
    assert refused({"name": 3, "zeta": 1}, allow_unknown=True).param == "name"
    # the default advice is the command line's
    with pytest.raises(ApiError, match="--allow-unknown-fields"):
        read_body(Sample, {"name": "a", "zeta": 1})
    assert CLI_UNKNOWN_FIELDS_ADVICE


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        ([], None, "The request body must be a JSON object."),
        ({}, "name", "name must be a string (not missing)."),
        ({"name": 5}, "name", "name must be a string (not the integer 5)."),
        ({"name": "a", "flag": 1}, "flag", "flag must be true or false (not the integer 1)."),
        ({"name": "a", "size": True}, "size", "size must be a whole number (not true)."),  # (strict: no bool)
        ({"name": "a", "size": "5"}, "size", "size must be a whole number (not '5')."),
        ({"name": "a", "count": "x"}, "count", "count must be a positive whole number (not 'x')."),
        ({"name": "a", "ids": [1, "2"]}, "ids", "ids[1] must be a whole number (not '2')."),
        ({"name": "a", "docs": ["x", {"txt": "y"}]}, "docs",
         'docs[1] must be a string or an object with a "text" string (not an object).'),
        ({"name": "a", "docs": "x"}, "docs", "docs must be an array (not 'x')."),
        ({"name": "a", "mode": "int8"}, "mode", "mode must be \"float\" or \"base64\" (not 'int8')."),
        # (an item's union: its members' own errors are not the item's, which is named as a whole)
        ({"name": "a", "inputs": ["x", [True]]}, "inputs", "inputs[1] must be a string or token ids (not an array)."),
    ],
)  # fmt: skip
def test_a_wrong_value_is_named_with_what_it_must_be(body: object, param: str | None, message: str) -> None:
    error = refused(body)
    assert (error.param, error.message, error.code) == (param, message, None)


def test_the_first_field_in_error_is_named() -> None:
    assert refused({"name": 1, "flag": "no"}).param == "name"  # (the fields' order, as the hand parsers checked)
    assert refused({"name": "a", "flag": "no", "zeta": 1}).param == "zeta"  # (unknown fields before types)


def test_the_model_pools_load_and_unload_bodies() -> None:
    """serve/models_api.py: {"model": "<name>"}, unknown fields as every route's (they were named without the
    server's advice, and --allow-unknown-fields did not ignore them)."""
    for body, param in (({}, "model"), ({"model": ""}, "model"), ({"model": 3}, "model"), ([], None)):
        with pytest.raises(ApiError) as info:
            unload_model(None, body)
        assert (info.value.status, info.value.param) == (400, param)
    with pytest.raises(ApiError) as info:
        load_model(EngineService(), None, None, {"model": "beta", "ttl": 60, "colour": "red"}, advice="ask nicely")
    assert (info.value.param, info.value.code) == ("colour", "unknown_field") and "ask nicely" in info.value.message
    with pytest.raises(ApiError) as info:  # (read: then this server has no pool to load it in)
        load_model(EngineService(), None, None, {"model": "beta", "colour": "red"}, allow_unknown=True)
    assert info.value.status == 404


def test_the_chat_and_completion_envelopes_list_every_field_ember_knows() -> None:
    """openai/chat_body's models and chat_request.KNOWN_BY_KIND (which /infill builds on) stay one list."""
    for kind, model in BODY_BY_KIND.items():
        assert set(model.model_fields) == KNOWN_BY_KIND[kind]
