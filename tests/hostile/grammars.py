"""Grammars and JSON schemas built to crash or hang llama.cpp's GBNF parser, each small enough for one
request. Measured on llama-cpp-python 0.3.36 in a thread with an 8 MB stack (unless said), before Ember
refused them:

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
- `leading_rule_chain()`: 14,000 rules that each begin with the next, 193 KB (under every other
  limit): llama.cpp's advance_stack recurses once per rule; on a 1 MB thread stack (Windows' default;
  `ulimit -s 1024` on Linux) `ember-chat serve` died with SIGSEGV.
- `hundred_million_repetition()`: `"x"{100000000}`, 24 bytes, which llama.cpp would expand (refused
  past its own 2,000, before it sees it). `huge_count()`: a count of 5,000 digits, which Python's
  int() refuses (a ValueError, not a sentence).
- `many_items_schema()`: `"minItems": 100000000`, 69 bytes: llama-cpp-python's converter writes the
  item out 100 million times (1.7 GB of grammar text) before any check reads it; at 1e9 the server
  is killed for its memory. `long_min_string_schema()` (minLength) and `pattern_count_schema()`
  (`^a{1000000000}$`) are the same through a string.
- `stray_brace_pattern_schema()`: a pattern with a `}` that closes nothing, 20 bytes: the converter
  loops forever without a step (a connection thread at 100% CPU until the server is killed).
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


def leading_rule_chain(n: int = 14_000) -> str:
    """`root ::= r0`, `r0 ::= r1`, … `rN ::= "a"` (short base-36 names: 193 KB for 14,000)."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"

    def name(i: int) -> str:
        text = ""
        while True:
            i, d = divmod(i, 36)
            text = digits[d] + text
            if not i:
                return "r" + text

    return "root ::= r0\n" + "".join(f"{name(i)} ::= {name(i + 1)}\n" for i in range(n)) + f'{name(n)} ::= "a"\n'


def hundred_million_repetition() -> str:
    return 'root ::= "x"{100000000}\n'


def huge_count() -> str:
    return 'root ::= "a"{' + "9" * 5_000 + "}\n"


def many_items_schema(items: int = 100_000_000) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}, "minItems": items}


def long_min_string_schema(length: int = 1_000_000_000) -> dict[str, Any]:
    return {"type": "object", "properties": {"note": {"type": "string", "minLength": length}}, "required": ["note"]}


def pattern_count_schema(times: int = 1_000_000_000) -> dict[str, Any]:
    return {"type": "string", "pattern": f"^a{{{times}}}$"}


def stray_brace_pattern_schema() -> dict[str, Any]:
    return {"type": "string", "pattern": "^a}$"}
