"""Request bodies as typed models (pydantic), read into the same 400s as the hand-written parsers give.

A route declares its body as a `Body` subclass (strict: JSON's types only, so `true` is no number and
`"5"` no integer; a field it does not declare is an unknown field) and reads it with `read_body`:

    class DetokenizeBody(Body):
        tokens: list[int]

    body = read_body(DetokenizeBody, raw, allow_unknown, advice)

`read_body` turns pydantic's ValidationError into Ember's ApiError 400s: unknown fields named, with the
advice on how the server ignores them (`--allow-unknown-fields`; with it they are left out), else the first
field in error named as `param`, its message saying where (`tokens[2]`), what it must be and what it was.
`Must("a positive whole number")` in a field's (or an item's) annotation says what it must be where the
type alone would not say it well (a union, a bound); any error inside it becomes that one sentence, except
an error of one of its items, which keeps its own place (`documents[1]`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler, ValidationError
from pydantic_core import CoreSchema, ErrorDetails, PydanticCustomError, core_schema

from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.openai.chat_request import CLI_UNKNOWN_FIELDS_ADVICE, check_known_fields

B = TypeVar("B", bound="Body")

_MUST = "must"  # the error type Must raises


class Body(BaseModel):
    """A JSON request body: strict types, no field it does not declare, read-only once read."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Nested(BaseModel):
    """An object inside a body (a rerank document): strict types; fields it does not declare are ignored,
    as clients send the objects of other APIs (Cohere's documents have more than their text)."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)


class Must:
    """`Annotated[T, Must("...")]`: what a value must be, said in the 400 for any error of its own (a wrong
    type, a bound, no member of a union fits), e.g. "top_n must be a positive whole number (not 0)."."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        what = self.what

        def one_sentence(value: Any, inner: Callable[[Any], Any]) -> Any:
            try:
                return inner(value)
            except ValidationError as exc:
                if all(_index(e["loc"]) for e in exc.errors()):
                    raise  # (its items' own errors: each names its item, documents[1])
                raise PydanticCustomError(_MUST, "must be {what}", {"what": what}) from None

        return core_schema.no_info_wrap_validator_function(one_sentence, handler(source))


def read_body(model: type[B], body: object, allow_unknown: bool = False, advice: str = CLI_UNKNOWN_FIELDS_ADVICE) -> B:
    """`body` (parsed JSON) as `model`, or the ApiError 400 a client is answered with."""
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
    unknown = sorted({str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden" and len(e["loc"]) == 1})
    if unknown and not allow_unknown:
        check_known_fields(dict.fromkeys(unknown), set(), allow_unknown, advice)  # (its 400, word for word)
    if unknown:  # ignored, as the server was told to: read without them
        return read_body(model, {k: v for k, v in body.items() if k not in unknown}, allow_unknown, advice)
    raise _api_error(model, errors[0])


def _index(loc: tuple[int | str, ...]) -> bool:
    return any(isinstance(part, int) for part in loc)


# what a value must be, by pydantic's error type (a field without Must)
_WHAT = {
    "string_type": "a string",
    "bool_type": "true or false",
    "int_type": "a whole number",
    "float_type": "a number",
    "list_type": "an array",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
}
# what a field of this type must be, when it is missing
_WHAT_TYPE: Mapping[object, str] = {str: "a string", bool: "true or false", int: "a whole number",
                                    float: "a number", list: "an array", dict: "an object"}  # fmt: skip


def _api_error(model: type[Body], error: ErrorDetails) -> ApiError:
    loc = error["loc"]
    name = str(loc[0])
    path = name + "".join(f"[{part}]" for part in loc[1:] if isinstance(part, int))  # (a union's tags left out)
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind == _MUST:
        what = str(ctx["what"])
    elif kind == "missing":
        what = _field_what(model, name)
    elif kind == "literal_error":
        what = str(ctx["expected"]).replace("'", '"')  # (JSON's quotes: "float" or "base64")
    elif kind in ("greater_than_equal", "greater_than"):
        what = f"a number {'at least' if kind == 'greater_than_equal' else 'over'} {ctx.get('ge', ctx.get('gt'))}"
    else:
        what = _WHAT.get(kind, "")
    if not what:  # (a check with no sentence here: pydantic's own words)
        return ApiError(400, f"{path}: {error['msg']}.", param=name)
    was = "missing" if kind == "missing" else _described(error["input"])
    return ApiError(400, f"{path} must be {what} (not {was}).", param=name)


def _field_what(model: type[Body], name: str) -> str:
    field = model.model_fields.get(name)
    if field is None:
        return ""
    must = next((m for m in field.metadata if isinstance(m, Must)), None)
    return must.what if must is not None else _WHAT_TYPE.get(field.annotation, "")


def _described(value: object) -> str:
    """A JSON value as a 400 names what was sent (its text if short, else its kind)."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else "a string"
    if isinstance(value, int):
        return f"the integer {value}" if abs(value) < 10**12 else "an integer"
    if isinstance(value, float):
        return f"the number {value:g}"
    if isinstance(value, list):
        return "an empty array" if not value else "an array"
    return "an object" if isinstance(value, dict) else f"a {type(value).__name__}"
