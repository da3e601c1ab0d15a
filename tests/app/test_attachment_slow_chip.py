"""A file slow to read says so honestly on its chip (issue 28: "slow HTML chip stays at 0 % until the
limit"). HTML (and DOCX, text) give no measure of their progress until they are read, so the chip
said "reading… 0%" with an empty bar for the whole minute, then vanished. Now it says how long its
reader has run, with a busy bar and, in its tooltip, that this kind of file gives no measure and when
Ember stops; when the limit ends it, the banner says so in a sentence and the text typed stays. A PDF,
which its reader measures page by page, keeps its percentage. The real window, a hostile slow page
(tests/hostile/slow_or_inflating_files.py) read in its child process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.attachment_files import reading_processes, write_pdf
from tests.helpers.attachments_window import slow_file, with_settings

WAIT_MS = 60_000
LIMIT_S = 4


@pytest.fixture(autouse=True)
def no_reader_left(qtbot: QtBot) -> Iterator[None]:
    yield
    qtbot.waitUntil(lambda: not reading_processes(), timeout=10_000)


def test_a_slow_html_file_says_how_long_it_has_been_read_then_why_it_stopped(
    qtbot: QtBot, paths: AppPaths, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    with_settings(paths, attachment_read_seconds=LIMIT_S)
    w = make_window()
    w.composer.editor.setPlainText("my question")
    bar = w.composer.attachments
    seen: list[str] = []
    with qtbot.waitSignal(bar.failed, timeout=WAIT_MS) as failed:
        w.composer.attach_paths([slow_file(tmp_path)])
        (item,) = bar.items
        chip = item.chip
        # past a second of reading: the chip counts the seconds, with a busy bar, never "0%"
        qtbot.waitUntil(lambda: chip.details.text().endswith(" s"), timeout=WAIT_MS)
        seen.append(chip.details.text())
        assert chip.details.text().startswith("reading… ") and "%" not in chip.details.text()
        assert chip.progress.isVisibleTo(chip) and chip.progress.maximum() == 0  # (busy: no measure)
        tip = chip.toolTip()
        assert "gives no measure of its progress" in tip, tip
        assert f"Ember stops reading it after {LIMIT_S} s (attachment_read_seconds in settings.json)" in tip
        qtbot.waitUntil(lambda: chip.details.text() != seen[0], timeout=WAIT_MS)  # (the seconds move)
        seen.append(chip.details.text())
    said = failed.args[0]
    assert said.startswith(f"page.html took longer than {LIMIT_S} seconds to read, so Ember stopped reading it")
    assert "attachment_read_seconds" in said and w.banner.isVisible() and w.banner.text() == said
    assert bar.items == [] and w.composer.editor.toPlainText() == "my question"
    assert seen[0] != seen[1]


def test_a_pdf_s_reader_measures_its_pages_and_its_chip_says_the_percentage(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    w = make_window()
    pdf = write_pdf(tmp_path / "long.pdf", [f"Page {n} of the long report. " * 40 for n in range(300)])
    w.composer.attach_paths([pdf])
    bar = w.composer.attachments
    (item,) = bar.items
    chip = item.chip
    percentages: list[str] = []

    def measured() -> bool:
        QApplication.processEvents()
        text = chip.details.text()
        if text.endswith("%"):
            percentages.append(text)
        return not bar.busy

    qtbot.waitUntil(measured, timeout=WAIT_MS)
    assert percentages and all(p.startswith("reading… ") for p in percentages)
    assert not bar.items[0].chip.progress.isVisibleTo(chip)
