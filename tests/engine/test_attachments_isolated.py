"""Every file is read in a child process (the window's thread never waits for a worker thread's Python
while a 300-page PDF is extracted, and a hostile file's time and memory stay in that process): the
same result and the same sentences as in-thread. The hostile files, through the window, the CLI and
the API, are in test_attachments_hostile*.py."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from ember_chat.engine.attachments import (
    FileReader,
    isolated,
    read_attachment,
    read_attachment_isolated,
    read_bytes_isolated,
)
from ember_chat.engine.attachments.kinds import Limits
from ember_chat.engine.attachments.reader_turns import Requester, Turns
from ember_chat.engine.errors import AttachmentError
from tests.helpers.attachment_files import write_encrypted_pdf, write_pdf
from tests.hostile import lying_file_reader
from tests.hostile.lying_file_reader import FORGED_SHA256

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


def test_a_reader_s_answer_never_chooses_the_file_s_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The digest names the blob every message attaching the same file shares: a reading process a
    hostile file took over claims another document's, so that document would be read as this text.
    The parent computes it from the bytes it gave the child (the file's, read by the parent)."""
    monkeypatch.setattr(isolated, "_read_in_child", lying_file_reader.claims_another_file_s_hash)
    data = LINE.encode()
    read = read_bytes_isolated("notes.txt", data)
    assert read.text.strip() == LINE.strip()  # (the reader did read it)
    assert read.sha256 == hashlib.sha256(data).hexdigest() != FORGED_SHA256
    notes = tmp_path / "notes.txt"
    notes.write_bytes(data)
    assert read_attachment_isolated(notes).sha256 == read.sha256
    assert "notes.txt: its reading process claimed another file's SHA-256" in caplog.text


def test_a_reader_s_answer_is_never_unpickled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pickle runs code of its writer's choosing where it is unpickled: a reading process a hostile
    file took over must not reach Ember's own process that way."""
    marker = tmp_path / "ran-in-ember.txt"
    monkeypatch.setattr(isolated, "_read_in_child", lying_file_reader.answers_with_a_pickle)
    with pytest.raises(AttachmentError) as refused:
        read_bytes_isolated("notes.txt", str(marker).encode())
    assert str(refused.value) == "notes.txt could not be read: its reader answered something Ember does not understand."
    assert not marker.exists(), f"code the reader chose ran in process {marker.read_text()} (the test's: {os.getpid()})"


def test_a_reader_that_stops_mid_answer_still_stops_at_the_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolated, "_read_in_child", lying_file_reader.stops_mid_answer)
    reader = FileReader(Limits(max_seconds=1))
    with pytest.raises(AttachmentError, match=r"^notes\.txt took longer than 1 second to read"):
        reader.read_bytes("notes.txt", LINE.encode())
    assert reader.pid is None


def test_the_parent_reads_the_child_s_messages_as_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Progress, the reader libraries' warnings, the answer: all plain data (Connection.recv
    unpickles what it reads, so the parent never calls it)."""

    def recv(_self: Connection) -> object:
        raise AssertionError("Connection.recv unpickles what the reading process sent")

    monkeypatch.setattr(Connection, "recv", recv)
    pdf = write_pdf(tmp_path / "report.pdf", [f"Page {p}\n" + LINE * 20 for p in range(30)])
    seen: list[float] = []
    assert read_attachment_isolated(pdf, progress=seen.append) == read_attachment(pdf)
    assert seen and seen[-1] == pytest.approx(1.0)
    with pytest.raises(AttachmentError, match="is empty"):
        read_bytes_isolated("blank.txt", b"")


class _InLine(threading.Thread):
    """A read waiting for its turn on another thread (`taken` is set once it has it)."""

    def __init__(self, turns: Turns, requester: Requester, order: list[str], name: str) -> None:
        super().__init__(name=name)
        self.turns, self.requester, self.order = turns, requester, order
        self.taken = threading.Event()
        self.stop = threading.Event()

    def run(self) -> None:
        if self.turns.take(self.requester, self.stop.is_set):
            self.order.append(self.name)
            self.taken.set()


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_turns_go_in_order_of_arrival_and_the_api_never_takes_the_last_reader() -> None:
    turns = Turns(2, {Requester.API: 1, Requester.LOCAL: 2})
    never = threading.Event().is_set  # (never set)
    order: list[str] = []
    assert turns.take(Requester.API, never)
    api = _InLine(turns, Requester.API, order, "api")  # the API's one reader is taken: it waits…
    api.start()
    lines = [api]
    try:
        _until(lambda: turns.count(Requester.API) == (1, 1))
        assert turns.take(Requester.LOCAL, never)  # …and does not hold up the window's file behind it
        assert turns.take(Requester.API, never, time.monotonic() + 0.2) is False  # (a bounded wait ends)
        first, second = (_InLine(turns, Requester.LOCAL, order, n) for n in ("first", "second"))
        lines += [first, second]
        first.start()
        _until(lambda: turns.count(Requester.LOCAL) == (1, 1))
        second.start()
        _until(lambda: turns.count(Requester.LOCAL) == (1, 2))
        turns.give_back(Requester.LOCAL)  # the API's is first in line, but its share is taken
        assert first.taken.wait(10) and order == ["first"]
        turns.give_back(Requester.API)  # now the API's (it came before the second)
        assert api.taken.wait(10) and order == ["first", "api"]
        assert not second.taken.is_set()
        turns.give_back(Requester.LOCAL)
        assert second.taken.wait(10) and order == ["first", "api", "second"]
        giving_up = _InLine(turns, Requester.LOCAL, order, "gives up")
        lines.append(giving_up)
        giving_up.start()
        _until(lambda: turns.count(Requester.LOCAL) == (1, 1))
        giving_up.stop.set()  # (a cancelled read leaves the line)
        _until(lambda: turns.count(Requester.LOCAL) == (1, 0))
        assert order == ["first", "api", "second"]
    finally:
        for line in lines:
            line.stop.set()
            line.join(10)
