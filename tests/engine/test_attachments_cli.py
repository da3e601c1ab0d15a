"""`ember-chat run --attach FILE` from a terminal: each attachment reported in the JSON line (name,
kind, tokens, mode; for retrieval the sources with file, page and chunk), and a file it cannot read is
one line on stderr and exit status 2, before any model loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember_chat.engine.attachments.kinds import MB
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.settings import Settings, SettingsFile
from tests.helpers.attachment_files import write_encrypted_pdf, write_pdf
from tests.helpers.cli import cli
from tests.hostile.slow_or_inflating_files import pdf_flate_bomb

FACT_PAGE = 31


def _manual(tmp_path: Path) -> Path:
    filler = "Regular maintenance keeps the machine running smoothly through every season of the year."
    pages = []
    for page in range(1, 41):
        lines = [f"Manual page {page}."] + [filler] * 10
        if page == FACT_PAGE:
            lines.insert(4, "The reset button is behind the left hinge of the lid.")
        pages.append("\n".join(lines))
    return write_pdf(tmp_path / "manual.pdf", pages)


def test_attachments_are_reported_whole_and_retrieved_with_their_sources(tiny_model: Path, tmp_path: Path) -> None:
    note = tmp_path / "note.txt"
    note.write_text("Bring the receipt.", encoding="utf-8")
    manual = _manual(tmp_path)
    out = cli("run", "--model", str(tiny_model), "--prompt", "Where is the reset button?", "--attach", str(note),
              "--attach", str(manual), "--json", "--max-tokens", "4", "--ctx", "4096", "--threads", "1",
              data_dir=tmp_path / "data")  # fmt: skip
    assert out.returncode == 0, out.stderr
    line = json.loads(out.stdout.rstrip("\n").split("\n")[-1])
    whole, retrieved = line["attachments"]
    assert whole["name"] == "note.txt" and whole["kind"] == "text" and whole["mode"] == "whole"
    assert whole["tokens"] > 0
    assert retrieved["name"] == "manual.pdf" and retrieved["kind"] == "pdf" and retrieved["mode"] == "retrieval"
    assert 0 < retrieved["used"] < retrieved["total"] and retrieved["tokens"] > 0
    assert len(retrieved["sources"]) == retrieved["used"]
    assert all(s["file"] == "manual.pdf" and isinstance(s["chunk"], int) for s in retrieved["sources"])
    assert FACT_PAGE in [s["page"] for s in retrieved["sources"]]
    assert line["prompt_tokens"] + 4 <= 4096
    said = f"[manual.pdf: pdf, too long to read whole: {retrieved['used']} of {retrieved['total']} passages used]"
    assert said in out.stderr
    assert not list((tmp_path / "data").glob("**/*.sqlite3"))  # a run keeps nothing in the data folder


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: write_encrypted_pdf(p / "locked.pdf", ["x"]), "locked.pdf is protected by a password"),
        (lambda p: p / "missing.txt", "missing.txt no longer exists"),
        (lambda p: write_pdf(p / "scan.pdf", [""]), "scan.pdf has no text layer"),
    ],
)
def test_a_file_it_cannot_read_is_one_line_and_exit_2(tiny_model: Path, tmp_path: Path, make, message: str) -> None:  # type: ignore[no-untyped-def]
    path = make(tmp_path)
    out = cli("run", "--model", str(tiny_model), "--prompt", "x", "--attach", str(path), data_dir=tmp_path / "data")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ember-chat: {message}"), out.stderr


def test_a_file_that_inflates_stops_at_the_time_limit_of_the_settings(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PDF whose compressed content stream inflates (tests/hostile): read in a child process that is
    stopped at settings.json's attachment_read_seconds, one line and exit 2 (it ran on, in-process)."""
    config = tmp_path / "config"
    monkeypatch.setenv("EMBER_CONFIG_DIR", str(config))
    SettingsFile(AppPaths(tmp_path / "data", config).settings_file).save(Settings(attachment_read_seconds=2))
    bomb = tmp_path / "inflating.pdf"
    bomb.write_bytes(pdf_flate_bomb(8 * MB))
    out = cli("run", "--model", str(tiny_model), "--prompt", "x", "--attach", str(bomb), data_dir=tmp_path / "data")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("ember-chat: inflating.pdf took longer than 2 seconds to read"), out.stderr
