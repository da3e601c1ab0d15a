"""What a GBNF grammar may cost before llama.cpp's parser and sampler see it.

llama.cpp's grammar code trusts its input. Its parser recurses once per nested group on the calling
thread's stack (20,000 nested parentheses, a 40 KB request, overflow it: SIGSEGV, the whole process
gone); a repetition such as `"a"{0,2000}` becomes 2,000 rules (12 bytes of text, 0.5 MB of memory);
and a grammar whose rules begin with other rules in several ways (`r1 ::= r2 "b" | r2 "c"`, 17 such
rules) gives the parser and the sampler one stack per way to begin, 2^17 of them: minutes of CPU
that no cancel reaches (a JSON schema's `$defs` can write that grammar too). None of it is an
exception Ember could catch, so `check_grammar_limits` reads the grammar first, the way llama.cpp's
parser does (llama-grammar.cpp: its syntax, and repetitions expanded into the same rules), and
refuses with a sentence what is over a limit. Every grammar goes through it before llama.cpp parses
it (grammar.py's checks for a request, grammar_sampling.py before a generation).

It is pure Python and iterative (no recursion to overflow here either), linear in the grammar's size
with the rule and element counts capped as they grow."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from ember_chat.engine.errors import InvalidParameter

MAX_GRAMMAR_CHARS = 200_000  # the grammar's text (a tool grammar of dozens of tools is ~60,000)
# Groups inside groups: llama.cpp's parser takes ~400 bytes of stack per level (20,000 overflow a
# thread's 8 MB); 1,000 need ~0.4 MB, inside the smallest thread stack Ember runs on (1 MB). The JSON
# schema converter nests one group per character a string's maxLength allows (grammar.py holds 256).
MAX_GRAMMAR_NESTING = 1_000
MAX_GRAMMAR_RULES = 50_000  # rules once repetitions are expanded (`x{0,n}` is n rules)
MAX_GRAMMAR_ELEMENTS = 1_000_000  # symbols in all rules once expanded (llama.cpp keeps 8 bytes each)
MAX_GRAMMAR_BRANCHES = 4_096  # ways a rule can begin (llama.cpp's stacks: 4,096 parse in ~0.1 s)
_REPETITION_THRESHOLD = 2000  # llama.cpp's own (MAX_REPETITION_THRESHOLD): above it, it refuses

_TERMINAL = -1  # a character, class, `.` or token: where a branch ends (only rules are followed)
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
_DIGITS = frozenset("0123456789")
_ESCAPES = {"x": 2, "u": 4, "U": 8, "t": 0, "r": 0, "n": 0, "\\": 0, '"': 0, "[": 0, "]": 0, "-": 0}
_HEX = frozenset("0123456789abcdefABCDEF")


@lru_cache(maxsize=64)
def _problem(text: str) -> str | None:
    if "\x00" in text:
        return "The grammar contains a NUL character; GBNF text cannot hold one."
    if len(text) > MAX_GRAMMAR_CHARS:
        return (
            f"The grammar is {len(text):,} characters long; the limit is {MAX_GRAMMAR_CHARS:,}. "
            "Split it into fewer, shorter rules."
        )
    try:
        rules = _Parser(text).parse()
        _check_branches(rules)
    except _Refused as exc:
        return str(exc)
    return None


def check_grammar_limits(text: str) -> None:
    """Raise InvalidParameter (a sentence saying what is over which limit, or where the GBNF is not
    valid) for a grammar llama.cpp must not be given; return for one it can parse and sample with."""
    problem = _problem(text)
    if problem is not None:
        raise InvalidParameter(problem)


class _Refused(Exception):
    pass


@dataclass
class _Rules:
    """The grammar as llama.cpp holds it, reduced to what its cost depends on: per rule id, its
    alternatives, each a sequence of rule ids and _TERMINAL."""

    names: dict[str, int] = field(default_factory=dict)  # llama.cpp's symbol_ids, quirks included
    alternatives: dict[int, list[list[int]]] = field(default_factory=dict)
    elements: int = 0


class _Parser:
    """llama-grammar.cpp's recursive-descent parser, written with an explicit stack of open groups."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.out = _Rules()

    # ----- errors and small readers, as llama.cpp's helpers

    def _fail(self, what: str, at: int | None = None) -> _Refused:
        at = self.pos if at is None else at
        line = self.text.count("\n", 0, at) + 1
        column = at - (self.text.rfind("\n", 0, at) + 1) + 1
        return _Refused(f"The grammar is not valid GBNF: {what} at line {line}, column {column}.")

    def _peek(self, offset: int = 0) -> str:
        at = self.pos + offset
        return self.text[at] if at < len(self.text) else ""

    def _space(self, newline_ok: bool) -> None:
        text, pos, end = self.text, self.pos, len(self.text)
        while pos < end:
            c = text[pos]
            if c == "#":
                while pos < end and text[pos] not in "\r\n":
                    pos += 1
            elif c in " \t" or (newline_ok and c in "\r\n"):
                pos += 1
            else:
                break
        self.pos = pos

    def _name(self) -> str:
        start = self.pos
        while self._peek() and self._peek() in _WORD:
            self.pos += 1
        if self.pos == start:
            raise self._fail("expecting a rule name")
        return self.text[start : self.pos]

    def _int(self) -> int:
        start = self.pos
        while self._peek() and self._peek() in _DIGITS:
            self.pos += 1
        if self.pos == start:
            raise self._fail("expecting a number")
        return int(self.text[start : self.pos])

    def _char(self) -> None:
        c = self._peek()
        if not c:
            raise self._fail("unexpected end of the grammar")
        if c != "\\":
            self.pos += 1
            return
        escape = self._peek(1)
        if escape not in _ESCAPES or not escape:
            raise self._fail(f"unknown escape \\{escape}")
        digits = self.text[self.pos + 2 : self.pos + 2 + _ESCAPES[escape]]
        if len(digits) != _ESCAPES[escape] or not set(digits) <= _HEX:
            raise self._fail(f"expecting {_ESCAPES[escape]} hex digits after \\{escape}")
        self.pos += 2 + len(digits)

    # ----- symbols and rules

    def _symbol(self, name: str) -> int:
        return self.out.names.setdefault(name, len(self.out.names))

    def _generated(self, base: str) -> int:
        rule_id = len(self.out.names)  # (llama.cpp: base_name + '_' + next id, which may replace a name)
        self.out.names[f"{base}_{rule_id}"] = rule_id
        return rule_id

    def _add_rule(self, rule_id: int, alternatives: list[list[int]]) -> None:
        if len(self.out.alternatives) >= MAX_GRAMMAR_RULES and rule_id not in self.out.alternatives:
            raise _Refused(
                f"The grammar expands to more than {MAX_GRAMMAR_RULES:,} rules (each repetition such as "
                "x{0,100} counts its maximum): use fewer or smaller repetitions."
            )
        self.out.alternatives[rule_id] = alternatives

    def _count(self, n: int) -> None:
        self.out.elements += n
        if self.out.elements > MAX_GRAMMAR_ELEMENTS:
            raise _Refused(
                f"The grammar expands to more than {MAX_GRAMMAR_ELEMENTS:,} symbols once its repetitions "
                "are written out: use fewer or smaller repetitions."
            )

    def parse(self) -> _Rules:
        self._space(True)
        while self.pos < len(self.text):
            name = self._name()
            self._space(False)
            if self.text[self.pos : self.pos + 3] != "::=":
                raise self._fail("expecting ::=")
            self.pos += 3
            self._space(True)
            self._alternates(name, self._symbol(name))
            c = self._peek()
            if c == "\r":
                self.pos += 2 if self._peek(1) == "\n" else 1
            elif c == "\n":
                self.pos += 1
            elif c:
                raise self._fail(f"expecting the end of the rule, found {c!r}")
            self._space(True)
        for alternatives in self.out.alternatives.values():
            for sequence in alternatives:
                for symbol in sequence:
                    if symbol != _TERMINAL and symbol not in self.out.alternatives:
                        missing = next(n for n, i in self.out.names.items() if i == symbol)
                        raise _Refused(f"The grammar is not valid GBNF: the rule {missing!r} is used but not defined.")
        return self.out

    def _alternates(self, name: str, rule_id: int) -> None:
        """One rule's alternatives (`a | b`), with its groups: a group opens a frame on `frames`
        instead of a recursive call, so nesting costs no Python stack."""
        frames = [_Frame(name, rule_id, nested=False)]
        while True:
            frame = frames[-1]
            opened = self._sequence(frame)
            if opened is not None:  # a group opened: parse it first, then go on with this sequence
                if len(frames) > MAX_GRAMMAR_NESTING:
                    raise _Refused(
                        f"The grammar nests groups (parentheses) more than {MAX_GRAMMAR_NESTING} deep; "
                        "name inner parts as rules of their own."
                    )
                frames.append(opened)
                continue
            if self._peek() == "|":
                frame.alternatives.append(frame.sequence)
                frame.sequence = []
                self.pos += 1
                self._space(True)
                continue
            frame.alternatives.append(frame.sequence)
            self._add_rule(frame.rule_id, frame.alternatives)
            frames.pop()
            if not frames:
                return
            if self._peek() != ")":
                raise self._fail("expecting ')'")
            self.pos += 1
            outer = frames[-1]
            self._space(outer.nested)
            outer.last_start = len(outer.sequence)
            outer.sequence.append(frame.rule_id)
            outer.prev_rules = max(1, len(self.out.names) - frame.names_before)
            self._count(1)

    def _sequence(self, frame: _Frame) -> _Frame | None:
        """Read symbols into `frame.sequence` until its end; return a new frame when a group opens."""
        seq = frame.sequence
        while self.pos < len(self.text):
            c = self.text[self.pos]
            if c == '"':
                self.pos += 1
                frame.last_start, frame.prev_rules = len(seq), 1
                while self._peek() != '"':
                    self._char()
                    seq.append(_TERMINAL)
                    self._count(1)
                self.pos += 1
                self._space(frame.nested)
            elif c == "[":
                self.pos += 1
                if self._peek() == "^":
                    self.pos += 1
                frame.last_start, frame.prev_rules = len(seq), 1
                while self._peek() != "]":  # (one element per character and per range's end, as llama.cpp)
                    self._char()
                    seq.append(_TERMINAL)
                    if self._peek() == "-" and self._peek(1) != "]":
                        self.pos += 1
                        self._char()
                        seq.append(_TERMINAL)
                self._count(len(seq) - frame.last_start)
                self.pos += 1
                self._space(frame.nested)
            elif c in "<!":
                self._token()
                frame.last_start, frame.prev_rules = len(seq), 1
                seq.append(_TERMINAL)
                self._count(1)
                self._space(frame.nested)
            elif c in _WORD:
                name = self._name()
                self._space(frame.nested)
                frame.last_start, frame.prev_rules = len(seq), 1
                seq.append(self._symbol(name))
                self._count(1)
            elif c == "(":
                self.pos += 1
                self._space(True)
                before = len(self.out.names)
                return _Frame(frame.name, self._generated(frame.name), nested=True, names_before=before)
            elif c == ".":
                frame.last_start, frame.prev_rules = len(seq), 1
                seq.append(_TERMINAL)
                self._count(1)
                self.pos += 1
                self._space(frame.nested)
            elif c in "*+?":
                self.pos += 1
                self._space(frame.nested)
                self._repeat(frame, *{"*": (0, None), "+": (1, None), "?": (0, 1)}[c])
            elif c == "{":
                self.pos += 1
                self._space(frame.nested)
                if self._peek() not in _DIGITS or not self._peek():
                    raise self._fail("expecting a number")
                low = self._int()
                self._space(frame.nested)
                high: int | None = None
                if self._peek() == "}":
                    high = low
                elif self._peek() == ",":
                    self.pos += 1
                    self._space(frame.nested)
                    if self._peek() in _DIGITS and self._peek():
                        high = self._int()
                        self._space(frame.nested)
                    if self._peek() != "}":
                        raise self._fail("expecting '}'")
                else:
                    raise self._fail("expecting ',' or '}'")
                self.pos += 1
                self._space(frame.nested)
                if low > _REPETITION_THRESHOLD:
                    raise _Refused(
                        f"The grammar repeats something at least {low:,} times; llama.cpp allows "
                        f"{_REPETITION_THRESHOLD:,} at most."
                    )
                if high is not None and high < low:  # (llama.cpp would count high - low rules down from 2^64)
                    raise _Refused(
                        f"The grammar repeats something {{{low},{high}}} times: its maximum is below its minimum."
                    )
                if high is not None and high > _REPETITION_THRESHOLD:
                    high = None  # (llama.cpp reads a larger maximum as no maximum)
                self._repeat(frame, low, high)
            else:
                break
        return None

    def _token(self) -> None:
        if self._peek() == "!":
            self.pos += 1
        if self._peek() != "<":
            raise self._fail("expecting '<'")
        end = self.text.find(">", self.pos)
        if end < 0:
            raise self._fail("expecting '>'")
        self.pos = end + 1

    def _repeat(self, frame: _Frame, low: int, high: int | None) -> None:
        """llama.cpp's rewrite of S{low,high}: S written `low` times in the sequence, then a chain of
        rules S'(x) ::= S S'(x-1) | (empty), `high - low` of them (one, referring to itself, without
        a maximum)."""
        seq = frame.sequence
        if frame.last_start == len(seq):
            raise self._fail("expecting something before the repetition")
        total = (high if high else (low or 1)) if high is not None else (low or 1)
        if frame.prev_rules * total > _REPETITION_THRESHOLD:
            raise _Refused(
                f"The grammar repeats a group of rules {frame.prev_rules * total:,} times in all; llama.cpp "
                f"allows {_REPETITION_THRESHOLD:,} at most."
            )
        prev = seq[frame.last_start :]
        optional = 1 if high is None else high - low
        self._count(len(prev) * max(0, low - 1) + (len(prev) + 1) * optional)
        if low == 0:
            del seq[frame.last_start :]
        else:
            seq.extend(prev * (low - 1))
        last = 0
        for i in range(optional):
            rule_id = self._generated(frame.name)
            again = [rule_id] if high is None else [last] if i > 0 else []
            self._add_rule(rule_id, [prev + again, []])
            last = rule_id
        if optional > 0:
            seq.append(last)
        frame.prev_rules *= total


@dataclass
class _Frame:
    """A rule or group being read: its alternatives so far and the sequence being read."""

    name: str  # the rule's name (generated rules are named after it, as llama.cpp names them)
    rule_id: int
    nested: bool  # inside parentheses (where a newline is only space)
    names_before: int = 0
    alternatives: list[list[int]] = field(default_factory=list)
    sequence: list[int] = field(default_factory=list)
    last_start: int = 0  # where the last symbol starts in `sequence` (what a repetition repeats)
    prev_rules: int = 1  # llama.cpp's n_prev_rules: how many rules that symbol stands for


def _check_branches(rules: _Rules) -> None:
    """Refuse a grammar that is left-recursive in a way that grows llama.cpp's stacks without end, or
    with a rule that can begin in more than MAX_GRAMMAR_BRANCHES ways.

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
                if symbol == _TERMINAL:
                    break
                firsts.append((symbol, at == len(seq) - 1))
                if symbol not in empty:
                    break
        leading[rule_id] = firsts
    branches: dict[int, int] = {}
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
                        raise _Refused(
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
            branches[rule_id] = _count_branches(alternatives[rule_id], branches, empty)
            if branches[rule_id] > MAX_GRAMMAR_BRANCHES:
                raise _Refused(
                    f"The grammar's rule {names.get(rule_id, '?')!r} can begin in more than "
                    f"{MAX_GRAMMAR_BRANCHES:,} ways (rules that begin with rules, each in several ways), which "
                    "llama.cpp would try one by one: factor the shared beginnings out."
                )


def _count_branches(alts: list[list[int]], branches: dict[int, int], empty: set[int]) -> int:
    total = 0
    for seq in alts:
        for symbol in seq:
            if symbol == _TERMINAL:
                total += 1
                break
            total += branches.get(symbol, 0)  # (0: a cycle of last symbols, counted once)
            if symbol not in empty:
                break
        else:  # (an empty alternative, or one whose every symbol may be empty: what follows it is one more)
            total += 1
    return min(total, MAX_GRAMMAR_BRANCHES + 1)


def _may_be_empty(alternatives: dict[int, list[list[int]]]) -> set[int]:
    """The rules that can match no text (a worklist, linear in the grammar's size)."""
    empty: set[int] = set()
    waiting: dict[int, list[tuple[int, int]]] = {}  # rule → (its alternative's index in `left`, count)
    left: list[list[int]] = []  # per alternative without terminals: [its rule, rules not known empty]
    todo: list[int] = []
    for rule_id, alts in alternatives.items():
        for seq in alts:
            if _TERMINAL in seq:
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
