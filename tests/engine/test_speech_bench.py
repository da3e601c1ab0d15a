"""engine/bench/speech.py, the benchmark lab's speech models side by side: the installed models, a model
that cannot load gets its reason while the others are measured, cancel, the CSV, and a clip made by
espeak-ng (or a sentence saying it is missing)."""

from __future__ import annotations

import csv
import io
import shutil
import threading
from pathlib import Path

import pytest

from ember_chat.engine.bench.speech import (
    CSV_COLUMNS,
    ClipError,
    generated_clip,
    installed_models,
    measure_speech,
    results_csv,
)


def test_a_model_that_cannot_load_gets_its_reason_and_the_others_are_measured(tmp_path: Path) -> None:
    assert installed_models(tmp_path) == ["tiny.en"]  # (nothing downloaded into tmp_path)
    clip = generated_clip(tmp_path / "clip.wav", "The train to the city leaves from platform number four.")
    seen: list[tuple[int, int, str]] = []
    results = measure_speech(["base.en", "tiny.en"], clip, threading.Event(), lambda *p: seen.append(p), tmp_path)
    missing, tiny = results
    assert missing.model == "base.en" and "not downloaded" in missing.error and missing.real_time_factor is None
    assert tiny.error == "" and tiny.real_time_factor is not None and 0 < tiny.real_time_factor < 2
    assert tiny.words and "train to the city" in tiny.text.lower() and tiny.clip_s and tiny.clip_s > 2
    assert seen == [(0, 2, "base.en"), (1, 2, "tiny.en"), (2, 2, "")]
    rows = list(csv.reader(io.StringIO(results_csv(results))))
    assert tuple(rows[0]) == CSV_COLUMNS and rows[1][0] == "base.en" and rows[1][-1] == missing.error
    assert rows[2][:1] == ["tiny.en"] and float(rows[2][1]) == round(tiny.real_time_factor, 3)

    cancelled = threading.Event()
    cancelled.set()
    assert measure_speech(["tiny.en"], clip, cancelled, None, tmp_path) == []


def test_no_espeak_ng_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    with pytest.raises(ClipError, match="apt install espeak-ng"):
        generated_clip(tmp_path / "clip.wav")
