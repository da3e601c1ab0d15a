"""A project source of 100,000+ files (issue 34's bad input "a folder with 100,000 files"), with the real
cap (projects/scan.MAX_FILES): the walk (projects/scan.py `scan`) and the indexer's first phase (the
walk, the comparison with the index, the files listed as pending: projects/indexer.py `Indexer.run` up
to its first progress report), not the reading of every file.

    nice python -m bench.many_files --json                 # 100,050 files across nested folders
    python -m bench.many_files --files 5000 --json         # quick

Figures (each phase in this process, its peak RSS measured from a reset of the kernel's high-water mark,
/proc/self/clear_refs 5):
- make_s: writing the files (tests/helpers/many_files.make_files: tiny .txt files, 50 per folder,
  3 levels of folders).
- scan_s, scan_peak_rss_mb: `list(scan(root))`; found (at most MAX_FILES), problems (the cap's one
  sentence, when there are more files than the cap).
- pending_s, pending_peak_rss_mb: `Indexer.run` on a new index, stopped at its first progress report
  (every file found is then listed as pending in the index; one file at most is read); files_total
  (the files it would read), pending_rows (the index's pending rows), problems.
- again_s: the same run again (the files already pending: compared with the index, none listed twice).
- stopped_found, stopped_s: the walk again, `stopped()` true from its 11th check (one per folder): the
  files of the ten folders listed before it (at most 10 x 50), and the walk ends there.
Budgets (the development machine's 2 shared cores): the walk <= 10 s and <= 200 MB peak RSS, the
pending phase <= 30 s, the cap reported once with its sentence, the stop seen within one folder.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ember_chat.engine.projects import scan as scanning
from ember_chat.engine.projects.index import PENDING, KnowledgeIndex
from ember_chat.engine.projects.indexer import Indexer, IndexProgress
from ember_chat.engine.projects.scan import FoundFile, ScanProblem, scan
from tests.helpers.many_files import make_files, memory_mb, reset_peak_rss


@dataclass(frozen=True)
class Root:
    id: int
    path: str


def _first_phase(index: KnowledgeIndex, root: Path) -> tuple[float, int, list[ScanProblem]]:
    """Indexer.run stopped at its first progress report: (seconds to it, files_total, problems)."""
    reached = threading.Event()
    first: list[IndexProgress] = []

    def progress(p: IndexProgress) -> None:
        if not first:
            first.append(p)
            reached.set()

    started = time.monotonic()
    run = Indexer(index, [Root(1, str(root))]).run(progress, stopped=reached.is_set)
    took = time.monotonic() - started
    assert run.stopped and first, "the run ended before its first progress report"
    return took, first[0].files_total, run.problems


def measure(count: int, workdir: Path) -> dict[str, object]:
    root = workdir / "many"
    started = time.monotonic()
    make_files(root, count)
    out: dict[str, object] = {"files": count, "cap": scanning.MAX_FILES, "make_s": round(time.monotonic() - started, 2)}

    base = memory_mb("VmRSS")
    reset_peak_rss()
    started = time.monotonic()
    items = list(scan(root))
    out["scan_s"] = round(time.monotonic() - started, 2)
    out["scan_peak_rss_mb"] = round(memory_mb("VmHWM"), 1)
    out["scan_rss_before_mb"] = round(base, 1)
    found = [i for i in items if isinstance(i, FoundFile)]
    out["found"] = len(found)
    out["scan_problems"] = [p.reason for p in items if isinstance(p, ScanProblem)]
    del items, found

    checks = 0

    def stop_after_ten_folders() -> bool:
        nonlocal checks
        checks += 1
        return checks > 10

    started = time.monotonic()
    out["stopped_found"] = sum(isinstance(i, FoundFile) for i in scan(root, stopped=stop_after_ten_folders))
    out["stopped_s"] = round(time.monotonic() - started, 3)

    index = KnowledgeIndex(workdir / "knowledge.sqlite3")
    try:
        reset_peak_rss()
        took, total, problems = _first_phase(index, root)
        out["pending_s"] = round(took, 2)
        out["pending_peak_rss_mb"] = round(memory_mb("VmHWM"), 1)
        out["files_total"] = total
        out["pending_problems"] = [p.reason for p in problems]
        out["pending_rows"] = sum(f.state == PENDING for f in index.files())
        took, total, _ = _first_phase(index, root)
        out["again_s"] = round(took, 2)
        out["again_files_total"] = total
    finally:
        index.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=scanning.MAX_FILES + 50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ember-many-") as tmp:
        out = measure(args.files, Path(tmp))
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for key, value in out.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
