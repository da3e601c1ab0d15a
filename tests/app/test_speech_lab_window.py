"""The benchmark lab's Speech tab (issue 33): the installed Whisper models (here the shipped tiny.en)
transcribe a clip of real speech, made by espeak-ng, on a worker: the table has each model's real-time
factor, time to the first segment, words/s, threads and what it heard; Copy and Export CSV; Cancel; the
user's own file or generated speech (only offered where espeak-ng is installed)."""

from __future__ import annotations

import csv
from pathlib import Path

from PySide6.QtGui import QGuiApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.lab.speech_panel import FILE, GENERATED, SpeechPanel
from tests.helpers.bench_lab import bench_dialog
from tests.helpers.speech import SENTENCES, speak


def test_the_speech_tab_measures_the_installed_models_on_the_users_own_clip(
    qtbot: QtBot, tmp_path: Path, tiny_model: Path
) -> None:
    dialog = bench_dialog(qtbot, tmp_path, tiny_model.parent)
    dialog.show()
    dialog.tabs.setCurrentWidget(dialog.speech)
    panel = dialog.speech
    assert panel.checked_models() == ["tiny.en"]  # (the shipped one; none downloaded here)
    assert panel.source.findData(GENERATED) >= 0  # (espeak-ng is installed here)
    panel.source.setCurrentIndex(panel.source.findData(FILE))
    panel.start()
    assert "Choose an audio file first" in panel.status.text() and not panel.running

    clip = speak(" ".join(SENTENCES[:2]), tmp_path / "my recording.wav")
    panel.set_clip(clip)
    assert panel.clip_line.text() == "my recording.wav" and panel.source.currentData() == FILE
    with qtbot.waitSignal(panel.run_finished, timeout=120_000):
        panel.run_button.click()
        assert dialog.running and not panel.run_button.isEnabled() and panel.cancel_button.isEnabled()
    assert panel.status.text() == "Done." and not dialog.running
    assert panel.table.rowCount() == 1
    row = [panel.table.item(0, c).text() for c in range(panel.table.columnCount())]
    model, rtf, first, words_per_s, threads, heard = row
    assert model == "tiny.en" and 0 < float(rtf) < 2 and 0 < float(first) < 30 and float(words_per_s) > 0
    assert int(threads) >= 1
    assert "weekly report" in heard.lower() and "thursday" in heard.lower()

    panel.copy_button.click()
    copied = QGuiApplication.clipboard().text().splitlines()
    assert copied[0].split("\t")[:2] == ["Model", "Real-time factor"] and copied[1].split("\t") == row
    panel.export(tmp_path / "speech.csv")
    with (tmp_path / "speech.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows[0]["model"] == "tiny.en" and float(rows[0]["real_time_factor"]) == float(rtf)
    dialog.close()
    assert dialog.speech.tasks.join(10)


def test_generated_speech_and_cancel(qtbot: QtBot) -> None:
    panel = SpeechPanel()
    qtbot.addWidget(panel)
    assert panel.source.currentData() == GENERATED and not panel.choose.isVisibleTo(panel)
    with qtbot.waitSignal(panel.run_finished, timeout=120_000):
        panel.start()
        panel.cancel_button.click()  # (before or while the model transcribes: nothing more is measured)
    assert panel.status.text().startswith("Cancelled") and panel.run_button.isEnabled()
    assert panel.table.rowCount() == 0
    panel.shutdown()
    assert panel.tasks.join(10)

    without = SpeechPanel(espeak=lambda: False)  # (no espeak-ng: only the user's own file)
    qtbot.addWidget(without)
    assert [without.source.itemData(i) for i in range(without.source.count())] == [FILE]
