"""Every file is read in a child process (the window's thread never waits for a worker thread's Python
while a 300-page PDF is extracted, and a hostile file's time and memory stay in that process): the
same result and the same sentences as in-thread. The hostile files, through the window, the CLI and
the API, are in test_attachments_hostile*.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ember_chat.engine.attachments import FileReader, read_attachment, read_attachment_isolated
from ember_chat.engine.errors import AttachmentError
from tests.attachment_files import write_encrypted_pdf, write_pdf

LINE = "The harbour report lists budgets, meetings and the code PELICAN-42 on its last page.\n"


def test_a_big_pdf_read_in_a_child_process_is_the_same_as_in_thread(tmp_path: Path) -> None:
    pages = [f"Page {p}\n" + LINE * 60 for p in range(120)]
    pdf = write_pdf(tmp_path / "report.pdf", pages)
    seen: list[float] = []
    isolated = read_attachment_isolated(pdf, progress=seen.append)
    assert isolated == read_attachment(pdf)
    assert len(isolated.pages) == 120 and "PELICAN-42" in isolated.text
    assert seen and seen == sorted(seen) and seen[-1] == pytest.approx(1.0)


def test_a_child_process_says_why_a_file_cannot_be_read(tmp_path: Path) -> None:
    locked = write_encrypted_pdf(tmp_path / "locked.pdf", [LINE * 60] * 120)
    with pytest.raises(AttachmentError) as in_thread:
        read_attachment(locked)
    with pytest.raises(AttachmentError) as isolated:
        read_attachment_isolated(locked)
    assert str(isolated.value) == str(in_thread.value)
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 4096)
    with pytest.raises(AttachmentError, match=r"blob\.bin"):
        read_attachment_isolated(binary)
    with pytest.raises(AttachmentError, match="no longer exists"):
        read_attachment_isolated(tmp_path / "gone.pdf")


def test_a_small_file_is_read_in_a_child_process_too(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text(LINE)
    reader = FileReader()
    pids: list[int | None] = []
    assert reader.read_path(notes, progress=lambda _f: pids.append(reader.pid)).text.strip() == LINE.strip()
    assert pids and all(pid is not None and pid != os.getpid() for pid in pids)
    assert reader.pid is None  # (gone)
