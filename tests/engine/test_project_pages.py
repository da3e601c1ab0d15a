"""A PDF's passages in a project's knowledge, cut by the real indexer (projects/indexer.py, reading in a
child process, headings.section_chunks): no passage runs across a page start, so the page a source names
("p. 2") is the page a reader finds its text on; a nearly empty page is no passage of its own; a heading
inside a page still opens a passage."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ember_chat.engine.attachments.chunking import MIN_PAGE
from ember_chat.engine.attachments.formats import pdf_text
from ember_chat.engine.projects.index import KnowledgeIndex, Passage
from ember_chat.engine.projects.indexer import Indexer
from tests.helpers.attachment_files import reading_processes, write_pdf
from tests.helpers.knowledge_sources import Root

DEFENCE = "The defence will take place on 14 September in room B-204."
# (page 1 and the top of page 2 fit in one passage of CHUNK_CHARS: before, it said "p. 1" for both)
PAGE_1 = "\n".join(f"Comment {i}: the literature review of chapter {i} needs more sources." for i in range(1, 13))
PAGE_2 = (
    "The method chapter reads well; the sample size is small.\n"
    + "\n".join(f"Remark {i}: figure {i} lacks units on its axes." for i in range(1, 5))
    + f"\n# Defence\n{DEFENCE}\nBring three printed copies of the thesis."
)
PAGE_3 = "- 3 -"  # (a page number alone: fewer than MIN_PAGE characters)


@pytest.fixture
def index(tmp_path: Path) -> Iterator[KnowledgeIndex]:
    made = KnowledgeIndex(tmp_path / "knowledge.sqlite3")
    yield made
    made.close()


def _indexed(index: KnowledgeIndex, pdf: Path) -> list[Passage]:
    run = Indexer(index, [Root(1, str(pdf.parent))]).run()
    assert (run.read, run.problems) == (1, [])
    assert reading_processes() == []
    file = index.file(pdf)
    assert file is not None
    return index.passages_of(file.id)


def _page_texts(pdf: Path) -> list[str]:
    """Each page's text as the reader gets it (pdf_text: pages joined by a blank line)."""
    text, starts = pdf_text(pdf.name, pdf.read_bytes(), None)
    return [text[a:b].strip() for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]


def test_each_passage_of_a_pdf_is_on_the_page_it_names(tmp_path: Path, index: KnowledgeIndex) -> None:
    (tmp_path / "docs").mkdir()
    pdf = write_pdf(tmp_path / "docs" / "supervisor_comments.pdf", [PAGE_1, PAGE_2, PAGE_3])
    assert len(PAGE_1) + len(PAGE_2) < 1200 and len(PAGE_3.replace(" ", "")) < MIN_PAGE
    pages = _page_texts(pdf)
    passages = _indexed(index, pdf)
    assert [p.page for p in passages] == [1, 2, 2]
    # the page number alone on page 3 ends page 2's last passage: no passage of its own
    assert passages[-1].text.endswith(f"copies of the thesis.\n\n{PAGE_3}")
    for passage in passages:
        own = passage.text.removesuffix(f"\n\n{PAGE_3}")
        assert own in pages[passage.page - 1], (passage.page, passage.text)
    # the heading inside page 2 opens a passage: the defence is found on page 2, under its heading
    (best, _), *_ = index.bm25("When is the defence?", 3)
    found = index.passage(best)
    assert DEFENCE in found.text and found.page == 2 and found.text.startswith("# Defence")
    assert "sample size" not in found.text and "sample size" in passages[1].text


def test_a_nearly_empty_first_page_joins_the_page_after_it(tmp_path: Path, index: KnowledgeIndex) -> None:
    """A title page of one short word (or a scan's stray marks) before the text is no passage alone: it
    begins the next page's passage, which names that page; an empty page (a scan) adds nothing."""
    (tmp_path / "docs").mkdir()
    pdf = write_pdf(tmp_path / "docs" / "draft.pdf", ["Draft", PAGE_1, "", PAGE_2])
    passages = _indexed(index, pdf)
    assert [p.page for p in passages] == [2, 4, 4]
    assert passages[0].text.startswith("Draft\n\nComment 1:") and passages[0].text.endswith("more sources.")
    assert DEFENCE in passages[2].text
