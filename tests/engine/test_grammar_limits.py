"""grammar_limits refuses nothing llama.cpp is made for: the grammars llama-cpp-python ships, the JSON
schema converter's, Ember's tool grammars and the syntax corners of GBNF pass and parse in llama.cpp;
what it refuses (tests/hostile/grammars.py, through the API in engine/test_api_grammar_limits.py) it refuses
without llama.cpp and in milliseconds."""

from __future__ import annotations

import time

import llama_cpp
import pytest
from llama_cpp import llama_grammar

from ember_chat.engine.core.tools import ToolRequest, ToolSpec
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.inference.calls.formats import ToolFormat
from ember_chat.engine.inference.calls.grammar import ToolGrammar
from ember_chat.engine.inference.grammar.limits import check_grammar_limits
from ember_chat.engine.inference.grammar.structured import check_grammar, json_grammar, schema_grammar
from ember_chat.engine.inference.llama.log import route_llama_log
from tests.hostile import grammars

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 100},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+(-[a-z]+)*$"}, "maxItems": 20},
    },
    "required": ["city"],
}
CORNERS = [  # GBNF that llama.cpp parses: escapes, classes, comments, repetitions, groups across lines
    'root ::= "\\x41\\u00e9\\U0001F600\\t\\"\\\\" [\\]\\-a-z] [^"] .\n',
    'root ::= ( # a comment\n  a | b )+ c{2} c{1,3} c{0,} c? # end\na ::= [a]\nb ::= [b]\nc ::= "c"\n',
    'root ::= ""\n',
    'root ::= ("a"?)* "b"\n',
    'root ::= "[" ( "1" ( "," "1" ){0,1000} )? "]"\r\n',
]


def parses(text: str) -> bool:
    route_llama_log()
    sampler = llama_cpp.llama_sampler_init_grammar(None, text.encode(), b"root")
    if sampler:
        llama_cpp.llama_sampler_free(sampler)
    return bool(sampler)


# A form of 90 long text fields, a list of 50 to 200 codes: grammars near the size limit (195,000
# characters) and repetitions the grammar holds pass the estimate made before the converter runs.
FORM = {"type": "object", "properties": {f"field{i}": {"type": "string", "maxLength": 256} for i in range(90)}}
CODES = {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{2,8}(-[0-9]{3}){0,2}$"}, "minItems": 50}


def legitimate() -> list[str]:
    shipped = [getattr(llama_grammar, n) for n in dir(llama_grammar) if n.endswith("_GBNF")]
    tools = ToolRequest((ToolSpec("get_weather", "Weather.", WEATHER), ToolSpec("noop", "Nothing.", {})), "required")
    made = [json_grammar(), *map(schema_grammar, (WEATHER, FORM, {**CODES, "maxItems": 200}))]
    made += [ToolGrammar(f, tools).grammar() for f in ToolFormat]
    return [*shipped, *made, *CORNERS, grammars.leading_rule_chain(1_500)]


def test_what_llama_cpp_is_made_for_passes() -> None:
    for text in legitimate():
        check_grammar_limits(text)
        assert parses(text), text


@pytest.mark.parametrize(
    "text",
    [
        grammars.nested_parentheses(),
        grammars.inverted_repetition(),
        grammars.branching_rules(),
        grammars.growing_left_recursion(),
        grammars.leading_rule_chain(),
        grammars.huge_count(),
    ],
    ids=[
        "nested_parentheses", "inverted_repetition", "branching_rules", "growing_left_recursion",
        "leading_rule_chain", "huge_count",
    ],
)  # fmt: skip
def test_a_hostile_grammar_is_refused_quickly_and_before_llama_cpp(text: str) -> None:
    start = time.perf_counter()
    with pytest.raises(InvalidParameter):
        check_grammar(text)
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('root ::= "a" "b"{0,2000}' * 1 + "\n" + 'x ::= "a"{0,2000}\n' * 30, "more than 50,000 rules"),
        ('root ::= "a"\x00', "NUL character"),
        ("root ::= missing\n", "the rule 'missing' is used but not defined"),
        ('root ::= "a" )\n', "not valid GBNF: expecting the end of the rule, found ')' at line 1, column 14"),
        ("root ::= " + '"a" ' * 60_000 + "\n", "the limit is 200,000"),
    ],
    ids=["rules", "nul", "undefined", "syntax", "size"],
)
def test_each_limit_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(InvalidParameter) as info:
        check_grammar_limits(text)
    assert says in str(info.value)
