"""Grammars and JSON schemas built to crash or hang llama.cpp's GBNF parser, each small enough for one
request. Measured on llama-cpp-python 0.3.36 in a thread with an 8 MB stack, before Ember refused them:

- `nested_parentheses()`: 20,000 groups inside each other, 40 KB: the parser's recursion overflows
  the stack, SIGSEGV, the process is gone (issue 27, item 5).
- `inverted_repetition()`: `"a"{5,2}`, 18 bytes: llama.cpp counts 2 - 5 rules in unsigned 64 bits and
  allocates until memory runs out.
- `branching_rules()`: 20 rules that each begin with the next in two ways, ~430 bytes: 2^20 parser
  stacks, minutes of CPU that no cancel reaches.
- `growing_left_recursion()`: a rule that begins with itself through a rule that may match nothing,
  46 bytes: llama.cpp's left-recursion check does not see it, its stacks grow one "x" at a time until
  memory runs out (std::bad_alloc, abort).
- `long_string_schema()`: a string parameter with maxLength 20,000: llama-cpp-python's converter nests
  one group per character, the same overflow as nested_parentheses (a legitimate schema: Ember now
  answers it, leaving that limit to the check after the answer).
- `long_pattern_schema()`: a pattern `a{1,20000}`: the converter writes the same nesting, which no
  rewriting of the schema can avoid (refused).
"""

from __future__ import annotations

from typing import Any


def nested_parentheses(depth: int = 20_000) -> str:
    return "root ::= " + "(" * depth + '"a"' + ")" * depth + "\n"


def inverted_repetition() -> str:
    return 'root ::= "a"{5,2}\n'


def branching_rules(n: int = 20) -> str:
    rules = "".join(f'r{i} ::= r{i + 1} "b" | r{i + 1} "c"\n' for i in range(n))
    return f'root ::= r0\n{rules}r{n} ::= "a"\n'


def growing_left_recursion() -> str:
    return 'root ::= n root "x" | "y"\nn ::= m\nm ::= "" | "a"\n'


def long_string_schema(length: int = 20_000) -> dict[str, Any]:
    return {"type": "object", "properties": {"note": {"type": "string", "maxLength": length}}, "required": ["note"]}


def long_pattern_schema(times: int = 20_000) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": f"^a{{1,{times}}}$"}},
        "required": ["code"],
    }
