"""Indexing many small Markdown notes into a project's knowledge (issue 34): projects/indexer.py
`Indexer.run` on a new index, every file read in a child process with the readers' limits
(attachments/isolated.py), chunked and stored; no embedding model.

    python -m bench.index_small_files --json                      # 2,000 notes of ~1.5 KB, in 20 folders
    python -m bench.index_small_files --batch-files 1 --json      # each file in a child of its own
    python -m bench.index_small_files --pdfs 50 --json            # 50 PDFs of 20 pages: pages/s

Figures: files_per_s (files read and stored per second of the run: the walk, the bytes, the children,
the chunks, SQLite), pages_per_s (PDF pages, with `--pdfs`: PDFs written at run time by
tests/helpers/attachment_files.write_pdf, `--pdf-pages` pages of ~2,400 characters each, read by pypdf
in the reading children), seconds, read, skipped, passages, and the load average before and after (the
machine's other work slows it). `--batch-files`: Indexer's batch_files (1: one child per file, as before
small text files were read in batches).

Measured here (2 shared vCPUs, 2,000 notes, the code before batches and after alternated, each side
twice, load average 1.9-2.2):
- run as `python -m bench.index_small_files`: before 7.1-7.2 files/s, after 386-388 files/s. Each child
  process also imports the parent's __main__ module (multiprocessing's preparation of a child), here
  this bench with the indexer and numpy: ~130 ms a child, paid once per file before, once per batch after;
- measure() called from `python -c` (no __main__ module to import): before 102-105 files/s, after
  1,604-1,652 files/s (15 times).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ember_chat.engine.projects.index import KnowledgeIndex
from ember_chat.engine.projects.indexer import BATCH_FILES, Indexer
from tests.helpers.attachment_files import write_pdf

PARAGRAPH = (
    "The harbour committee met on {day} to discuss the pier's repairs, the tide tables kept by the "
    "harbour master and the budget for the lighthouse; note {n} records what was decided and who acts next."
)


@dataclass(frozen=True)
class Root:
    id: int
    path: str


def make_notes(root: Path, count: int) -> None:
    """`count` Markdown notes of about 1.5 KB (a heading, three paragraphs), 100 to a folder."""
    for n in range(count):
        folder = root / f"folder{n // 100:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        body = "\n\n".join(PARAGRAPH.format(day=f"day {n % 28 + 1}", n=n) + f" Word token{n}x{i}." for i in range(3))
        (folder / f"note{n:05d}.md").write_text(f"# Note {n}\n\n{body}\n\n## Actions\n\n- ask about berth {n % 40}\n")


def make_pdfs(root: Path, count: int, pages: int) -> None:
    """`count` PDFs of `pages` pages, each page 30 lines of about 80 characters."""
    root.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        text = [
            "\n".join(PARAGRAPH.format(day=f"day {p % 28 + 1}", n=f"{n}.{p}.{line}")[:80] for line in range(30))
            for p in range(pages)
        ]
        write_pdf(root / f"report{n:04d}.pdf", text)


def measure(count: int, batch_files: int, workdir: Path, pdf_pages: int = 0) -> dict[str, object]:
    """Indexing `count` Markdown notes, or with `pdf_pages`, `count` PDFs of that many pages."""
    root = workdir / "notes"
    if pdf_pages:
        make_pdfs(root, count, pdf_pages)
    else:
        make_notes(root, count)
    index = KnowledgeIndex(workdir / "knowledge.sqlite3")
    try:
        load_before = os.getloadavg()[0]
        started = time.monotonic()
        run = Indexer(index, [Root(1, str(root))], batch_files=batch_files).run()
        took = time.monotonic() - started
        load_after = os.getloadavg()[0]
    finally:
        index.close()
    return {
        "files": count,
        "batch_files": batch_files,
        "read": run.read,
        "skipped": run.skipped,
        "pages": run.pages,
        "passages": run.passages,
        "seconds": round(took, 2),
        "files_per_s": round(run.read / took, 1),
        "pages_per_s": round(run.pages / took, 1),
        "load_before": round(load_before, 2),
        "load_after": round(load_after, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--batch-files", type=int, default=BATCH_FILES)
    parser.add_argument("--pdfs", type=int, default=0, help="PDFs instead of Markdown notes")
    parser.add_argument("--pdf-pages", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ember-notes-") as tmp:
        if args.pdfs:
            out = measure(args.pdfs, args.batch_files, Path(tmp), args.pdf_pages)
        else:
            out = measure(args.files, args.batch_files, Path(tmp))
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for key, value in out.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
