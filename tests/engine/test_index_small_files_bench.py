"""bench/index_small_files.py's figures come from a real run at a small size: Markdown notes give files/s,
PDFs written at run time give their pages and pages/s."""

from __future__ import annotations

import json

import pytest

from bench import index_small_files as bench


def test_notes_are_read_and_counted(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--files", "30", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["files"], out["read"], out["skipped"], out["pages"]) == (30, 30, 0, 0)
    assert out["passages"] >= 30 and out["files_per_s"] > 0 and out["pages_per_s"] == 0


def test_pdfs_give_pages_per_second(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--pdfs", "3", "--pdf-pages", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["files"], out["read"], out["skipped"], out["pages"]) == (3, 3, 0, 12)
    assert out["passages"] >= 12 and out["pages_per_s"] > 0
