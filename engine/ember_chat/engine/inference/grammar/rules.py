"""A GBNF grammar read the way llama.cpp's parser reads it (llama-grammar.cpp), reduced to what its
cost depends on: the rules once repetitions are expanded, each a list of alternatives of rule ids
and terminals. Written with an explicit stack of open groups (no recursion to overflow here), linear
in the grammar's size, with the nesting, rule and element counts refused as they grow past their
limits (limits.py reads the rules' stacks and holds the size)."""

from __future__ import annotations

from dataclasses import dataclass, field

# Groups inside groups: llama.cpp's parser takes ~400 bytes of stack per level (20,000 overflow a
# thread's 8 MB); 1,000 need ~0.4 MB, inside the smallest thread stack Ember runs on (1 MB). The JSON
# schema converter nests one group per character a string's maxLength allows (structured.py holds 256).
MAX_GRAMMAR_NESTING = 1_000
MAX_GRAMMAR_RULES = 50_000  # rules once repetitions are expanded (`x{0,n}` is n rules)
MAX_GRAMMAR_ELEMENTS = 1_000_000  # symbols in all rules once expanded (llama.cpp keeps 8 bytes each)
_REPETITION_THRESHOLD = 2000  # llama.cpp's own (MAX_REPETITION_THRESHOLD): above it, it refuses

TERMINAL = -1  # a character, class, `.` or token: where a branch ends (only rules are followed)
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
_DIGITS = frozenset("0123456789")
_ESCAPES = {"x": 2, "u": 4, "U": 8, "t": 0, "r": 0, "n": 0, "\\": 0, '"': 0, "[": 0, "]": 0, "-": 0}
_HEX = frozenset("0123456789abcdefABCDEF")


def read_rules(text: str) -> Rules:
    """The grammar's rules as llama.cpp would hold them; Refused (its sentence) where the text is not
    valid GBNF or expands past a limit."""
    return _Parser(text).parse()


class Refused(Exception):
    """A grammar over a limit, or not valid GBNF: the sentence that says which and where."""


@dataclass
class Rules:
    """The grammar as llama.cpp holds it, reduced to what its cost depends on: per rule id, its
    alternatives, each a sequence of rule ids and TERMINAL."""

    names: dict[str, int] = field(default_factory=dict)  # llama.cpp's symbol_ids, quirks included
    alternatives: dict[int, list[list[int]]] = field(default_factory=dict)
    elements: int = 0


class _Parser:
    """llama-grammar.cpp's recursive-descent parser, written with an explicit stack of open groups."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.out = Rules()

    # ----- errors and small readers, as llama.cpp's helpers

    def _fail(self, what: str, at: int | None = None) -> Refused:
        at = self.pos if at is None else at
        line = self.text.count("\n", 0, at) + 1
        column = at - (self.text.rfind("\n", 0, at) + 1) + 1
        return Refused(f"The grammar is not valid GBNF: {what} at line {line}, column {column}.")

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
        # (a count past 18 digits is past every limit; int() of over 4,300 digits would be a ValueError)
        return int(self.text[start : self.pos]) if self.pos - start <= 18 else 10**18

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
            raise Refused(
                f"The grammar expands to more than {MAX_GRAMMAR_RULES:,} rules (each repetition such as "
                "x{0,100} counts its maximum): use fewer or smaller repetitions."
            )
        self.out.alternatives[rule_id] = alternatives

    def _count(self, n: int) -> None:
        self.out.elements += n
        if self.out.elements > MAX_GRAMMAR_ELEMENTS:
            raise Refused(
                f"The grammar expands to more than {MAX_GRAMMAR_ELEMENTS:,} symbols once its repetitions "
                "are written out: use fewer or smaller repetitions."
            )

    def parse(self) -> Rules:
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
                    if symbol != TERMINAL and symbol not in self.out.alternatives:
                        missing = next(n for n, i in self.out.names.items() if i == symbol)
                        raise Refused(f"The grammar is not valid GBNF: the rule {missing!r} is used but not defined.")
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
                    raise Refused(
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
                    seq.append(TERMINAL)
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
                    seq.append(TERMINAL)
                    if self._peek() == "-" and self._peek(1) != "]":
                        self.pos += 1
                        self._char()
                        seq.append(TERMINAL)
                self._count(len(seq) - frame.last_start)
                self.pos += 1
                self._space(frame.nested)
            elif c in "<!":
                self._token()
                frame.last_start, frame.prev_rules = len(seq), 1
                seq.append(TERMINAL)
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
                seq.append(TERMINAL)
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
                    raise Refused(
                        f"The grammar repeats something at least {low:,} times; llama.cpp allows "
                        f"{_REPETITION_THRESHOLD:,} at most."
                    )
                if high is not None and high < low:  # (llama.cpp would count high - low rules down from 2^64)
                    raise Refused(
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
            raise Refused(
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
