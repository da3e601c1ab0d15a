"""The section heading each passage of a knowledge file is under (projects/headings.py): Markdown's
`#` and underlined titles, GNU Info's node lines and titles, none in a PDF page's text; passages cut
never across a heading."""

from __future__ import annotations

import time

from ember_chat.engine.projects.headings import MIN_SECTION, headings, passage_headings, section_chunks

MARKDOWN = """# Harbour handbook

Intro text about the harbour and its people: who works where, which boats moor at which quay, when the
office opens and who to ask about a berth for the winter.

## Tides

The tide tables are kept by the harbour master, printed each month and pinned beside the office door;
the high and low waters of the next four weeks, the spring tides marked in red, the neap tides in blue.

```sh
# not a heading: a comment in a code block
echo tides
```

Gate codes
----------

PELICAN-42 opens the east gate.
"""

INFO = """\x1f
File: coreutils.info,  Node: tac invocation,  Next: nl invocation,  Prev: cat invocation,  Up: Output

3.2 'tac': Concatenate and write files in reverse
=================================================

'tac' copies each FILE to standard output, reversing the records (lines by default).
"""


def test_markdown_and_underlined_headings_outside_code_blocks() -> None:
    assert [title for _, title in headings(MARKDOWN)] == ["Harbour handbook", "Tides", "Gate codes"]


def test_an_info_node_line_and_the_title_under_it() -> None:
    found = [title for _, title in headings(INFO)]
    assert found == ["tac invocation", "3.2 'tac': Concatenate and write files in reverse"]


def test_a_pdf_pages_first_line_and_a_rule_are_not_headings() -> None:
    pdf_text = "Annual report 2024\nRevenue grew by four percent.\n\fSecond page\nCosts fell.\n\n-----\n\nEnd."
    assert headings(pdf_text) == []
    long_line = "word " * 40
    assert headings(f"{long_line}\n{'=' * len(long_line.strip())}\n") == []  # (a paragraph, not a title)


def test_each_passage_gets_the_heading_it_is_under() -> None:
    chunks, titles = section_chunks(MARKDOWN * 3, size=MIN_SECTION)
    assert len(chunks) == len(titles) > 3
    for chunk, title in zip(chunks, titles, strict=True):
        if "PELICAN-42" in chunk.text:
            assert title == "Gate codes"
        if "tide tables" in chunk.text:
            assert title == "Tides"
    assert passage_headings("no headings here", section_chunks("no headings here")[0]) == [""]


def test_a_passage_never_spans_two_sections() -> None:
    sections = [f"Section {n}\n{'=' * 9}\n\n" + f"Words of section {n}. " * 30 for n in range(1, 5)]
    text = "\n".join(sections)
    chunks, titles = section_chunks(text, size=2000)  # (one chunk would hold two sections)
    assert titles == ["Section 1", "Section 2", "Section 3", "Section 4"]
    for n, chunk in enumerate(chunks, start=1):
        assert chunk.text.startswith(f"Section {n}") and f"section {n + 1}" not in chunk.text
        assert text[chunk.start :].startswith(chunk.text)


def test_an_info_node_line_joins_the_title_after_it_and_pages_follow_the_offsets() -> None:
    chunks, titles = section_chunks(INFO)
    assert len(chunks) == 1 and titles == ["3.2 'tac': Concatenate and write files in reverse"]
    paged = "First page text.\n" * 20 + "Second page\n" + "More text.\n" * 20
    chunks, _ = section_chunks(paged, pages=[0, paged.index("Second page")], size=200)
    assert chunks[0].page == 1 and chunks[-1].page == 2


def test_a_long_line_is_looked_through_in_linear_time() -> None:
    """The headings are found in Ember's own process, on the indexing thread: a minified JSON file's
    one long line (130,000 characters took 53 s) or a title line of closing #s must not hold it."""
    for line in ('{"a": 1, ' * 150_000 + "}", "# x" + " #" * 500_000 + "y", "x" + " " * 1_000_000 + "y"):
        started = time.monotonic()
        found = headings(f"{line}\n=====\n\nbody\n")
        assert time.monotonic() - started < 1.0
        assert found == []  # (over MAX_HEADING: a paragraph, not a title)
    assert headings("# Tides ##\n\n# ###\n#   \n# \n") == [(0, "Tides"), (12, "#"), (18, "")]


def test_many_headings_between_many_code_fences_are_found_in_linear_time() -> None:
    """Each heading is looked up among the fenced code blocks by a binary search: 80,000 headings between
    80,000 fences (1 MB) took minutes when each heading was checked against every fence."""
    text = "```\n# not a heading\n```\n# Heading\n" * 80_000
    started = time.monotonic()
    found = headings(text)
    assert time.monotonic() - started < 1.0
    assert len(found) == 80_000 and {title for _, title in found} == {"Heading"}
    assert headings("# A\n```\n# B\n```\n# C\n") == [(0, "A"), (16, "C")]


def test_a_page_s_last_passage_is_not_under_the_next_page_s_heading() -> None:
    first = ("We measured things carefully. " * 40) + "\n\nThe defence is on 3 May, in room 4."
    second = "# Results\n" + "Results were good. " * 20
    text = first + "\n\n" + second
    chunks, titles = section_chunks(text, (0, len(first) + 2))
    tail = next(i for i, c in enumerate(chunks) if "defence" in c.text)
    assert chunks[tail].page == 1 and titles[tail] == ""  # (it was "Results", the next page's, 2 lines on)
    assert titles[-1] == "Results" and chunks[-1].page == 2
