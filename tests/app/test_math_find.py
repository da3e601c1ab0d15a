"""Which parts of a message are formulas: the four delimiters, prices in prose, code, escapes."""

from __future__ import annotations

from ember_chat.app.transcript.render.math_find import find_math, protect


def latex(text: str) -> list[tuple[str, bool]]:
    return [(s.latex, s.display) for s in find_math(text)]


def test_the_four_delimiters() -> None:
    text = r"Inline $a^2$ and \(b_1\); display $$\frac{1}{2}$$ and \[\sum_i x_i\]."
    assert latex(text) == [("a^2", False), ("b_1", False), (r"\frac{1}{2}", True), (r"\sum_i x_i", True)]
    spans = find_math(text)
    assert [s.source(text) for s in spans] == ["$a^2$", r"\(b_1\)", r"$$\frac{1}{2}$$", r"\[\sum_i x_i\]"]


def test_dollar_amounts_in_prose_are_not_math() -> None:
    assert latex("It costs $5 and $10 to get in.") == []
    assert latex("Prices: $5, $6.50 or $100.") == []
    assert latex("I paid $ 3 for it and $4 later") == []
    assert latex("$5, or $x^2$ if you prefer") == [("x^2", False)]
    assert latex("from $20$30") == []  # a closing $ followed by a digit is no closing
    assert latex("a $ b $ c") == []  # space after the opening, before the closing


def test_code_spans_and_blocks_are_untouched() -> None:
    text = "Use `$x$` in code, and\n\n```python\nprint('$a$ and $$b$$')\n```\n\nthen $y$."
    assert latex(text) == [("y", False)]
    assert latex("``a $x$ b`` and $z$") == [("z", False)]
    assert latex("an unclosed fence\n```\n$x$") == []
    in_a_list = '1. Run this:\n\n    ```sh\n    echo "$HOME and $PATH" $y$\n    ```\n\n2. Then $z$.'
    assert latex(in_a_list) == [("z", False)]  # (a fence indented inside a list item is code too)
    assert latex(in_a_list.replace("```", "~~~")) == [("z", False)]


def test_escaped_dollars_are_dollars() -> None:
    assert latex(r"It costs \$5 and \$x\$ stays text") == []
    assert latex(r"$a \$ b$") == [(r"a \$ b", False)]
    assert latex(r"\\(not math\\)") == []


def test_a_formula_does_not_span_a_blank_line() -> None:
    assert latex("$a\n\nb$") == []
    assert latex("$a\nb$") == [("a\nb", False)]
    assert latex("$$\n\\int_0^1 f\n$$") == [("\\int_0^1 f", True)]


def test_protect_hides_each_formula_behind_one_character() -> None:
    text = "Let $x_1$ and $x_2$ be *roots*: $$x = \\frac{-b}{2a}$$"
    marked, spans = protect(text)
    assert [s.latex for _, s in spans] == ["x_1", "x_2", "x = \\frac{-b}{2a}"]
    assert marked == f"Let {spans[0][0]} and {spans[1][0]} be *roots*: {spans[2][0]}"
    assert len({c for c, _ in spans}) == 3 and all(0xE000 <= ord(c) <= 0xF8FF for c, _ in spans)
    taken = "\ue000 is in the text, and $y$"
    marked, spans = protect(taken)
    assert spans[0][0] != "\ue000" and marked == f"\ue000 is in the text, and {spans[0][0]}"
    assert protect("no math, $5") == ("no math, $5", [])
