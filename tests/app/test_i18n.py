"""Translations ready: every user-visible string in app/ goes through Qt's translation functions (a
literal handed straight to a text setter, a widget constructor or a message signal fails here), and
`pyside6-lupdate` extracts them."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

APP = REPO / "app" / "ember_chat" / "app"

TEXT_SETTERS = {
    "setText", "setToolTip", "setPlaceholderText", "setWindowTitle", "setAccessibleName",
    "setAccessibleDescription", "addAction", "addMenu", "addTab", "addRow", "setTitle", "setStatusTip",
    "showMessage", "setSpecialValueText", "setHorizontalHeaderLabels", "setTabToolTip", "setLabelText",
    "show_error", "show_notice", "setTitleText", "setWhatsThis", "addItem", "information",
    "warning", "critical", "question", "about", "getText", "getSaveFileName", "getOpenFileName",
    "getExistingDirectory", "addButton", "insertItem", "ask",
}  # fmt: skip
# the arguments that are texts, where not all of them are (a dialog's parent, a default file name)
TEXT_ARGS = {
    "getSaveFileName": (1,), "getOpenFileName": (1,), "getExistingDirectory": (1,), "getText": (1, 2),
    "information": (1, 2), "warning": (1, 2), "critical": (1, 2), "question": (1, 2), "about": (1, 2), "ask": (1, 2),
}  # fmt: skip
WIDGETS = {
    "QLabel", "QPushButton", "QCheckBox", "QGroupBox", "QAction", "QToolButton", "QRadioButton",
    "QListWidgetItem", "QMessageBox",
}  # fmt: skip
MESSAGE_SIGNALS = {"error", "notice", "failed"}
WORDS = re.compile(r"[A-Za-z]{2,}")


def _has_words(text: str) -> bool:
    """Words a user reads: not markup around translated parts, not a URL."""
    return "://" not in text and bool(WORDS.search(re.sub(r"<[^>]*>?|^[^<]*>", " ", text)))


def _is_text(node: ast.AST) -> bool:
    """A literal with words in it (or an f-string with words: it cannot be translated as it stands)."""
    if isinstance(node, ast.JoinedStr):
        return any(isinstance(v, ast.Constant) and _has_words(str(v.value)) for v in node.values)
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and _has_words(node.value)


def untranslated(source: str, filename: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        checked = name in TEXT_SETTERS or name in WIDGETS
        if name == "emit" and isinstance(f, ast.Attribute):
            receiver = f.value
            checked = isinstance(receiver, ast.Attribute) and receiver.attr in MESSAGE_SIGNALS
        args = [a for i, a in enumerate(node.args) if name not in TEXT_ARGS or i in TEXT_ARGS[name]]
        if checked and any(_is_text(a) for a in args):
            found.append(f"{filename}:{node.lineno}: {ast.unparse(node)[:100]}")
    return found


def test_every_user_visible_string_is_translatable() -> None:
    problems = []
    for path in sorted(APP.rglob("*.py")):
        problems += untranslated(path.read_text(encoding="utf-8"), path.name)
    assert problems == []


def test_the_check_itself_catches_literals() -> None:
    bad = 'label = QLabel("Hello there")\nself.error.emit(f"Could not {x}")\nw.setToolTip("Tip text")\n'
    good = 'label = QLabel(self.tr("Hello there"))\nw.setFormat("%.1f")\nw.setObjectName("banner")\n'
    assert len(untranslated(bad, "bad.py")) == 3
    assert untranslated(good, "good.py") == []


def test_lupdate_extracts_the_strings(tmp_path: Path) -> None:
    lupdate = shutil.which("pyside6-lupdate", path=str(Path(sys.executable).parent))
    if lupdate is None:
        pytest.fail("pyside6-lupdate is part of PySide6's tools and should be installed with it")
    ts = tmp_path / "ember.ts"
    files = [str(p) for p in sorted(APP.rglob("*.py"))]
    subprocess.run([lupdate, *files, "-ts", str(ts)], check=True, capture_output=True, timeout=120)
    text = ts.read_text(encoding="utf-8")
    messages = text.count("<message>")
    assert messages >= 250, messages
    for source in ("Conversation transcript", "Copy message", "Keyboard shortcuts", "Welcome to Ember", "Send"):
        assert f"<source>{source}</source>" in text, source


def test_a_translation_is_loaded_for_the_system_language(qtbot: object, tmp_path: Path) -> None:
    """The whole path a translator would take: extract, translate one string, compile, load."""
    from PySide6.QtCore import QCoreApplication, QLocale, QTranslator

    from ember_chat.app.conversation.composer import Composer
    from ember_chat.app.main import install_translations

    tools = Path(sys.executable).parent
    ts = tmp_path / "ember_de.ts"
    subprocess.run(
        [tools / "pyside6-lupdate", APP / "conversation" / "composer.py", "-ts", ts], check=True, capture_output=True
    )
    text = ts.read_text(encoding="utf-8")
    marker = '<source>Send</source>\n        <translation type="unfinished"></translation>'
    assert marker in text
    ts.write_text(text.replace(marker, "<source>Send</source>\n        <translation>Senden</translation>"))
    subprocess.run([tools / "pyside6-lrelease", ts, "-qm", tmp_path / "ember_de.qm"], check=True, capture_output=True)
    app = QCoreApplication.instance()
    assert install_translations(app, tmp_path, QLocale("de_DE"))
    try:
        composer = Composer()
        qtbot.addWidget(composer)
        assert composer.button.text() == "Senden"
    finally:
        for translator in app.findChildren(QTranslator):
            app.removeTranslator(translator)
            translator.deleteLater()
    assert not install_translations(app, tmp_path, QLocale("fr_FR"))  # no French file: English stays


def test_the_engines_one_line_texts_are_translated_in_the_window(qtbot: object, tmp_path: Path) -> None:
    """The metrics line, the backend badge and the model status are built by the engine (no Qt) from
    templates the window hands in translated; the command line keeps English."""
    from PySide6.QtCore import QCoreApplication, QLocale, QTranslator

    from ember_chat.app.engine_link.wording import window_wording
    from ember_chat.app.main import install_translations
    from ember_chat.engine.inference.backend import ModelDescription
    from ember_chat.engine.inference.metrics import MetricsRecorder, RunContext

    tools = Path(sys.executable).parent
    ts = tmp_path / "ember_de.ts"
    subprocess.run(
        [tools / "pyside6-lupdate", APP / "engine_link" / "wording.py", "-ts", ts], check=True, capture_output=True
    )
    text = ts.read_text(encoding="utf-8")
    for source, german in (("{count} tokens", "{count} Token"), ("{count} token", "{count} Token"), ("stop", "Ende"),
                           ("{backend} · {threads} threads · {layers} GPU layers",
                            "{backend} · {threads} Threads · {layers} GPU-Schichten")):  # fmt: skip
        marker = f'<source>{source}</source>\n        <translation type="unfinished"></translation>'
        assert marker in text, source
        text = text.replace(marker, f"<source>{source}</source>\n        <translation>{german}</translation>")
    ts.write_text(text)
    subprocess.run([tools / "pyside6-lrelease", ts, "-qm", tmp_path / "ember_de.qm"], check=True, capture_output=True)
    rec = MetricsRecorder(RunContext("m", None, "CPU", 2, 0, 512, None))
    rec.prefill_started(4, 0, rec.t_start_ns)
    rec.token(rec.t_start_ns + 1_000_000, 1)
    metrics = rec.finish("stop")
    model = ModelDescription("m", "CPU", 512, threads=2, gpu_layers=0)
    app = QCoreApplication.instance()
    window_wording.cache_clear()
    assert install_translations(app, tmp_path, QLocale("de_DE"))
    try:
        assert metrics.summary_line(window_wording()).endswith("1 Token · Ende")
        assert model.badge(window_wording()).startswith("CPU · 2 Threads · 0 GPU-Schichten")
        assert metrics.summary_line().endswith("1 token · stop")  # the engine's own words: English
    finally:
        for translator in app.findChildren(QTranslator):
            app.removeTranslator(translator)
            translator.deleteLater()
        window_wording.cache_clear()
