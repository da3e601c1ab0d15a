"""What a GBNF grammar may cost before llama.cpp's parser and sampler see it.

llama.cpp's grammar code trusts its input. Its parser recurses once per nested group on the calling
thread's stack (20,000 nested parentheses, a 40 KB request, overflow it: SIGSEGV, the whole process
gone); a repetition such as `"a"{0,2000}` becomes 2,000 rules (12 bytes of text, 0.5 MB of memory);
and a grammar whose rules begin with other rules in several ways (`r1 ::= r2 "b" | r2 "c"`, 17 such
rules) gives the parser and the sampler one stack per way to begin, 2^17 of them: minutes of CPU
that no cancel reaches (a JSON schema's `$defs` can write that grammar too). None of it is an
exception Ember could catch, so `check_grammar_limits` reads the grammar first, the way llama.cpp's
parser does (rules.py: its syntax, and repetitions expanded into the same rules), then the
stacks its rules give llama.cpp (here), and refuses with a sentence what is over a limit. Every
grammar goes through it before llama.cpp parses it (structured.py's checks for a request,
sampling.py before a generation).

It is pure Python and iterative (no recursion to overflow here either), linear in the grammar's size
with the rule and element counts capped as they grow."""

from __future__ import annotations

from functools import lru_cache

from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.inference.grammar.rules import TERMINAL, Refused, Rules, read_rules

MAX_GRAMMAR_CHARS = 200_000  # the grammar's text (a tool grammar of dozens of tools is ~60,000)
MAX_GRAMMAR_BRANCHES = 4_096  # ways a rule can begin (llama.cpp's stacks: 4,096 parse in ~0.1 s)
# Rules that begin with rules, one inside the next: llama.cpp's advance_stack and its left-recursion
# check recurse once per rule (~100 bytes of stack: 11,000 overflowed a 1 MB thread stack, 8,000 did not).
MAX_GRAMMAR_CHAIN = 2_000


def check_grammar_limits(text: str) -> None:
    """Raise InvalidParameter (a sentence saying what is over which limit, or where the GBNF is not
    valid) for a grammar llama.cpp must not be given; return for one it can parse and sample with."""
    if len(text) > MAX_GRAMMAR_CHARS:  # (before the cache, which would keep 64 of the largest texts a request sends)
        raise InvalidParameter(
            f"The grammar is {len(text):,} characters long; the limit is {MAX_GRAMMAR_CHARS:,}. "
            "Split it into fewer, shorter rules."
        )
    problem = _problem(text)
    if problem is not None:
        raise InvalidParameter(problem)


@lru_cache(maxsize=64)  # (a grammar is checked for the request, then again before its generation)
def _problem(text: str) -> str | None:
    if "\x00" in text:
        return "The grammar contains a NUL character; GBNF text cannot hold one."
    try:
        rules = read_rules(text)
        _check_branches(rules)
    except Refused as exc:
        return str(exc)
    return None


def _check_branches(rules: Rules) -> None:
    """Refuse a grammar that is left-recursive in a way that grows llama.cpp's stacks without end,
    with a rule that can begin in more than MAX_GRAMMAR_BRANCHES ways, or with a chain of rules that
    begin with rules longer than MAX_GRAMMAR_CHAIN (`r1 ::= r2`, `r2 ::= r3`, …).

    The ways a rule can begin are llama.cpp's stacks when the rule is next: an alternative that begins
    with a terminal is one, one that begins with a rule is as many as that rule has (and the next
    symbol's too while the ones before may match nothing). Counted once per rule, in an order where a
    rule's first rules come before it (a depth-first walk with an explicit stack).

    A rule that can begin with itself is left recursion. llama.cpp looks for it only through rules
    with an empty alternative of their own, so `r ::= n r "x" | "y"` with `n ::= m`, `m ::= "" | "a"`
    passes its check, and its stacks then grow by one "x" at a time until memory runs out (46 bytes of
    grammar). Here it is found through every rule that may match nothing. A cycle whose every step is
    the last symbol of its alternative pushes nothing, so llama.cpp meets the same stack again and
    stops (`("a"?)*` is such a cycle): that one is allowed."""
    alternatives = rules.alternatives
    empty = _may_be_empty(alternatives)
    leading: dict[int, list[tuple[int, bool]]] = {}  # rule → (a rule it may begin with, last in its alternative)
    for rule_id, alts in alternatives.items():
        firsts = []
        for seq in alts:
            for at, symbol in enumerate(seq):
                if symbol == TERMINAL:
                    break
                firsts.append((symbol, at == len(seq) - 1))
                if symbol not in empty:
                    break
        leading[rule_id] = firsts
    branches: dict[int, int] = {}
    depths: dict[int, int] = {}
    names = {i: n for n, i in rules.names.items()}
    for start in alternatives:
        if start in branches:
            continue
        stack = [[start, 0, True]]  # [rule, its next leading rule, whether it was reached as a last symbol]
        on_path = {start: 0}  # rule → its place in `stack`
        while stack:
            frame = stack[-1]
            rule_id, i = frame[0], frame[1]
            if i < len(leading[rule_id]):
                frame[1] = i + 1
                child, last = leading[rule_id][i]
                if child in on_path:
                    if not (last and all(f[2] for f in stack[on_path[child] + 1 :])):
                        raise Refused(
                            f"The grammar is left-recursive: the rule {names.get(child, '?')!r} can begin with "
                            "itself (through rules that may match nothing), which llama.cpp cannot use; write "
                            "the repetition with * or + instead."
                        )
                elif child not in branches:
                    on_path[child] = len(stack)
                    stack.append([child, 0, last])
                continue
            stack.pop()
            del on_path[rule_id]
            branches[rule_id], depths[rule_id] = _count_branches(alternatives[rule_id], branches, depths, empty)
            if branches[rule_id] > MAX_GRAMMAR_BRANCHES:
                raise Refused(
                    f"The grammar's rule {names.get(rule_id, '?')!r} can begin in more than "
                    f"{MAX_GRAMMAR_BRANCHES:,} ways (rules that begin with rules, each in several ways), which "
                    "llama.cpp would try one by one: factor the shared beginnings out."
                )
            if depths[rule_id] > MAX_GRAMMAR_CHAIN:
                raise Refused(
                    f"The grammar's rule {names.get(rule_id, '?')!r} begins with a rule that begins with a rule, "
                    f"and so on, more than {MAX_GRAMMAR_CHAIN:,} deep, which would overflow llama.cpp's stack: "
                    "begin the rules with a character, or write the chain as one rule."
                )


def _count_branches(
    alts: list[list[int]], branches: dict[int, int], depths: dict[int, int], empty: set[int]
) -> tuple[int, int]:
    """The ways a rule can begin, and how deep llama.cpp recurses to find them: once per rule it
    enters before a terminal (a rule that may match nothing is entered, then what follows it)."""
    total, deepest = 0, 0
    for seq in alts:
        depth = 0
        for symbol in seq:
            if symbol == TERMINAL:
                total += 1
                break
            total += branches.get(symbol, 0)  # (0: a cycle of last symbols, counted once)
            depth += 1 + depths.get(symbol, 0)
            if symbol not in empty:
                break
        else:  # (an empty alternative, or one whose every symbol may be empty: what follows it is one more)
            total += 1
        deepest = max(deepest, depth)
    return min(total, MAX_GRAMMAR_BRANCHES + 1), min(deepest, MAX_GRAMMAR_CHAIN + 1)


def _may_be_empty(alternatives: dict[int, list[list[int]]]) -> set[int]:
    """The rules that can match no text (a worklist, linear in the grammar's size)."""
    empty: set[int] = set()
    waiting: dict[int, list[tuple[int, int]]] = {}  # rule → (its alternative's index in `left`, count)
    left: list[list[int]] = []  # per alternative without terminals: [its rule, rules not known empty]
    todo: list[int] = []
    for rule_id, alts in alternatives.items():
        for seq in alts:
            if TERMINAL in seq:
                continue
            if not seq:
                todo.append(rule_id)
                continue
            counts: dict[int, int] = {}
            for symbol in seq:
                counts[symbol] = counts.get(symbol, 0) + 1
            left.append([rule_id, len(seq)])
            for symbol, n in counts.items():
                waiting.setdefault(symbol, []).append((len(left) - 1, n))
    while todo:
        rule_id = todo.pop()
        if rule_id in empty:
            continue
        empty.add(rule_id)
        for index, n in waiting.get(rule_id, ()):
            left[index][1] -= n
            if left[index][1] == 0:
                todo.append(left[index][0])
    return empty
