"""Read aloud (issue 33): the text a voice says of an answer (engine/speech/read_aloud.py), whole and
as it streams: sentences once finished, Markdown's marks not said, code blocks announced, formulas
read as their text, the model's thinking skipped."""

from __future__ import annotations

from ember_chat.engine.speech.read_aloud import (
    CODE_BLOCK,
    MAX_SENTENCE_CHARS,
    SentenceStream,
    formula_text,
    inline_text,
    speakable_sentences,
)

ANSWER = """<think>Let me think. Hmm.</think>
# The answer

Here is **bold** text and a [link](https://example.com/a.b). It costs $5 or so?
Use `a.b c` now. The formula $E = mc^2$ holds.

- first item
- second *item*

```python
print("x. y. z")
```
After the code, e.g. this stays one sentence. Last one without a stop"""

SAID = [
    "The answer",
    "Here is bold text and a link.",
    "It costs $5 or so?",
    "Use a.b c now.",
    "The formula E equals mc to the power 2 holds.",
    "first item",
    "second item",
    CODE_BLOCK,
    "After the code, e.g. this stays one sentence.",
    "Last one without a stop",
]


def test_a_whole_answer_is_said_without_marks_code_or_thinking() -> None:
    assert speakable_sentences(ANSWER) == SAID


def test_streamed_in_small_pieces_the_same_sentences_come() -> None:
    for size in (1, 3, 17):
        stream = SentenceStream()
        said = []
        for i in range(0, len(ANSWER), size):
            said += stream.feed(ANSWER[i : i + size])
        assert said + stream.finish() == SAID, size


def test_a_sentence_comes_as_soon_as_it_is_finished_not_at_the_line_end() -> None:
    stream = SentenceStream()
    assert stream.feed("The first sentence is") == []
    assert stream.feed(" here. The second") == ["The first sentence is here."]
    assert stream.feed(" one") == []
    assert stream.finish() == ["The second one"]


def test_a_full_stop_inside_code_or_a_formula_ends_no_sentence() -> None:
    stream = SentenceStream()
    assert stream.feed("Call `os.path. join` and see $a. b$ there. Next") == ["Call os.path. join and see a. b there."]
    stream = SentenceStream()
    assert stream.feed("```\nx = 1. y = 2. \n") == []  # an open code block says nothing yet
    assert stream.feed("```\n") == [CODE_BLOCK]


def test_a_code_block_never_closed_is_still_announced() -> None:
    stream = SentenceStream()
    assert stream.feed("Look:\n```\nwhile True. pass\n") == ["Look:"]
    assert stream.finish() == [CODE_BLOCK]


def test_thinking_never_closed_is_not_said() -> None:
    stream = SentenceStream()
    assert stream.feed("<thi") == []
    assert stream.feed("nk>I wonder. Maybe. ") == []
    assert stream.finish() == []


def test_markdown_marks_are_not_said() -> None:
    assert inline_text("**Bold**, _it_, ~~gone~~ and ![a cat](cat.png) <b>x</b>") == "Bold, it, gone and a cat x"
    assert speakable_sentences("| a | b |\n|---|---|\n| 1 | 2 |\n") == ["a, b", "1, 2"]
    assert speakable_sentences("> quoted line.\n\n---\n\n## Heading ##") == ["quoted line.", "Heading ##"]


def test_formulas_are_read_as_their_text() -> None:
    assert formula_text(r"\frac{a}{b} \le \alpha^2") == "a over b less than or equal to alpha to the power 2"
    assert inline_text(r"so \(x_1 = 2\) then") == "so x 1 equals 2 then"


def test_a_run_on_line_is_said_in_bounded_pieces() -> None:
    sentences = speakable_sentences("word " * 1000)
    assert len(sentences) > 1
    assert all(len(s) <= MAX_SENTENCE_CHARS for s in sentences)
