"""What a JSON schema may cost before llama-cpp-python's converter turns it into a grammar.

The converter (llama_cpp.llama_grammar, a port of llama.cpp's json_schema_to_grammar) recurses once
per object or array inside another, writes an item out once per repetition a schema asks for, and
loops forever on some patterns; the whole grammar is in memory before limits.py can read
it. `check_schema_limits` reads the schema first (without recursion) and refuses with a sentence a
schema nested too deep, one whose grammar would be written out far past the grammar's size limit,
and a pattern the converter would never finish. structured.py calls it for every schema: a request's
response_format or json_schema, a tool's parameters, the window's schema."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.inference.grammar.limits import MAX_GRAMMAR_CHARS

MAX_SCHEMA_DEPTH = 64  # objects and arrays inside each other in a schema (the converter recurses on them)
HELD_REPEAT = 256  # a longer maxLength or maxItems is checked after the answer, not held by the grammar
SMALL_RANGE = 256  # an integer range this small is held by the grammar (as the list of its values)


def check_schema_limits(schema: dict[str, Any]) -> None:
    """InvalidParameter, with a sentence, for a schema the converter must not be given."""
    _check_depth(schema)
    _check_written_out(schema)


def _check_depth(schema: dict[str, Any]) -> None:
    """InvalidParameter for a schema nested deeper than MAX_SCHEMA_DEPTH (read without recursion)."""
    todo: list[tuple[object, int]] = [(schema, 1)]
    while todo:
        node, depth = todo.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise InvalidParameter(
                f"The JSON schema nests objects and arrays more than {MAX_SCHEMA_DEPTH} deep; "
                "define the inner parts once in $defs and refer to them with $ref."
            )
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        todo.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


# What the converter may write before the grammar is read (a request's schema, without the NUL and
# size checks a grammar's text has): twice the grammar's own limit, as the estimate below may be over.
MAX_WRITTEN_OUT = 2 * MAX_GRAMMAR_CHARS
_COUNTED = {"minLength": "string", "maxLength": "string", "minItems": "array", "maxItems": "array"}
_QUANTIFIER = re.compile(r"\\.|\[(?:\\.|[^\]])*\]?|\{([^}]*)\}?", re.DOTALL)  # (an escape, a class, a count)


def _check_written_out(schema: dict[str, Any]) -> None:
    """InvalidParameter for a schema whose grammar would be written out past MAX_WRITTEN_OUT
    characters, before llama-cpp-python's converter writes it: the converter writes an item once per
    repetition asked for — a string's minLength (and a maxLength the grammar holds), an array's
    minItems (and maxItems), a pattern's {n,m}, and the values of an integer's small range — and the
    whole grammar is held in memory before any check reads it (`"minItems": 100000000`, 70 bytes,
    was 1.7 GB of grammar and a dead server). Estimated the way the converter writes (read without
    recursion, each $ref once): a rule name is the path of property names to it, written where it is
    defined and where it is used, and an array's item is written by its name each time."""
    total = 0
    worst = (0, "", 0, "")  # (its cost, the keyword, its count, where): named in the sentence
    todo: list[tuple[object, int, tuple[str, ...]]] = [(schema, 4, ())]  # (node, its rule name's length, path)
    resolved: set[str] = set()
    while todo:
        node, name, path = todo.pop()
        if not isinstance(node, dict):
            continue
        total += 4 * (name + 8)
        for keyword, count, per_copy in _repetitions(node, name):
            cost = count * per_copy
            total += cost
            if cost > worst[0]:
                worst = (cost, keyword, count, _pointer(path))
        pattern = node.get("pattern")
        outside = _QUANTIFIER.sub("", pattern) if isinstance(pattern, str) else ""  # (escapes, classes, counts)
        if "]" in outside or "}" in outside:
            # (the converter reads a ']' or '}' that closes nothing as no step forward, and loops forever)
            raise InvalidParameter(
                f"The JSON schema's pattern at {_pointer(path) or 'the top'} has a ']' or '}}' that closes nothing; "
                "write it \\] or \\} to mean the character."
            )
        todo.extend(_children(node, name, path))
        ref = node.get("$ref")
        if isinstance(ref, str) and ref not in resolved:  # (the converter writes a definition once)
            resolved.add(ref)
            target = _resolve(schema, ref)
            last = ref.rsplit("/", 1)[-1]
            todo.append((target, len(last), tuple(ref[2:].split("/"))))
        entries = node.get("allOf")
        for entry in entries if isinstance(entries, list) else ():
            # (an allOf entry's $ref writes its definition's properties again into this rule, each time)
            if isinstance(entry, dict) and isinstance(entry.get("$ref"), str):
                target = _resolve(schema, entry["$ref"])
                properties = target.get("properties") if isinstance(target, dict) else None
                total += len(properties) * (name + 16) if isinstance(properties, dict) else 0
        if total > MAX_WRITTEN_OUT:
            _, keyword, count, where = worst
            if keyword:
                what = f"its {keyword} of {_amount(count)} at {where or 'the top'}"
                advice = (
                    "Ask for fewer repetitions (a few thousand at most, in minLength, minItems and a pattern's {n,m})."
                )
            else:  # (long property names nested deep, allOf writing the same definition again and again)
                what, advice = "it", "Make it smaller: fewer or shorter property names, each definition used once."
            raise InvalidParameter(
                f"The JSON schema cannot be used to constrain the answer: {what} would be written out as a "
                f"grammar over {MAX_GRAMMAR_CHARS:,} characters, the limit. {advice}"
            )


def _repetitions(node: dict[str, Any], name: int) -> Iterator[tuple[str, int, int]]:
    """(keyword, how many copies, characters a copy) for what this schema node writes out."""
    for keyword, kind in _COUNTED.items():
        count = node.get(keyword)
        if not _is_count(count) or (keyword.startswith("max") and count > HELD_REPEAT):
            continue  # (a longer maximum is left out of the grammar and checked after the answer)
        yield keyword, count, 8 if kind == "string" else name + 24  # ("char", or the item's rule and ",")
    pattern = node.get("pattern")
    if isinstance(pattern, str):
        for match in _QUANTIFIER.finditer(pattern):
            for number in (match.group(1) or "").split(","):
                try:  # (as the converter reads a count: int() of each part)
                    count = int(number)
                except ValueError:
                    continue
                if count > 0:
                    yield "pattern count", count, name + 12
    values = small_range(node)
    if values is not None:  # (written as the list of its values)
        yield "integer range", len(values), max(len(str(values[0])), len(str(values[-1]))) + 8


def _is_number(value: object) -> bool:  # (not inf or nan, which JSON may hold and math.ceil refuses)
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_count(value: object) -> bool:  # (a float makes the converter fail, never repeat)
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _children(node: dict[str, Any], name: int, path: tuple[str, ...]) -> Iterator[tuple[object, int, tuple[str, ...]]]:
    """The schemas the converter visits inside `node`, each with its rule name's length, as it names them."""
    properties = node.get("properties")
    if isinstance(properties, dict):
        for key, child in properties.items():
            yield child, name + 1 + len(str(key)), (*path, "properties", str(key))
    additional = node.get("additionalProperties")
    if isinstance(additional, dict):
        yield additional, name + 17, (*path, "additionalProperties")
    for keyword, suffix in (("items", 5), ("prefixItems", 7), ("anyOf", 1), ("oneOf", 1), ("allOf", 1)):
        value = node.get(keyword)
        if isinstance(value, dict):
            yield value, name + suffix, (*path, keyword)
        elif isinstance(value, list):
            for i, child in enumerate(value):
                yield child, name + suffix + len(str(i)) + 1, (*path, keyword, str(i))


def _resolve(schema: dict[str, Any], ref: str) -> object:
    """The node a local `#/...` reference names (None where it names none: the converter says so)."""
    if not ref.startswith("#/"):
        return None
    target: object = schema
    for part in ref[2:].split("/"):
        if not isinstance(target, dict) or part not in target:
            return None
        target = target[part]
    return target


def _pointer(path: tuple[str, ...]) -> str:
    """Where in the schema, as a JSON pointer cut short for a sentence."""
    text = "/" + "/".join(part[:40] for part in path) if path else ""
    return text if len(text) <= 200 else text[:199] + "…"


def _amount(count: int) -> str:
    return f"{count:,}" if count < 10**15 else "over 10^15"


def small_range(node: dict[str, Any]) -> range | None:
    """The values of an integer schema whose bounds allow fewer than SMALL_RANGE of them, else None."""
    if node.get("type") != "integer" or "enum" in node or "const" in node:
        return None
    bounds = {k: v for k, v in node.items() if k in _BOUNDS and _is_number(v)}
    lows = [math.ceil(bounds["minimum"])] if "minimum" in bounds else []
    lows += [math.floor(bounds["exclusiveMinimum"]) + 1] if "exclusiveMinimum" in bounds else []
    highs = [math.floor(bounds["maximum"])] if "maximum" in bounds else []
    highs += [math.ceil(bounds["exclusiveMaximum"]) - 1] if "exclusiveMaximum" in bounds else []
    if lows and highs and 0 <= min(highs) - max(lows) < SMALL_RANGE:
        return range(max(lows), min(highs) + 1)
    return None


_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
