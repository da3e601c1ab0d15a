"""The window's scripted mode, for CI and demos (`ember-chat --model NAME --send TEXT --screenshot FILE`):
the message sent once the model is loaded, what arrived said on stderr, the window's pixels saved once
the answer is complete and rendered, then the window closes."""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Slot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.inference.metrics import GenerationMetrics


class ScriptedRun(QObject):
    """--send / --screenshot: slots of a GUI-thread object, so they run in the GUI thread."""

    def __init__(self, window: MainWindow, send: str | None, screenshot: str | None) -> None:
        super().__init__(window)
        self.window = window
        self.send = send
        self.screenshot = screenshot
        self.sent = False
        window.bridge.loaded.connect(self.on_loaded)
        window.bridge.load_failed.connect(self.on_failed)
        window.controller.generating_changed.connect(self.on_generating)

    @Slot(object)
    def on_loaded(self, _model: object) -> None:
        if self.send and not self.sent:
            self.sent = True
            self.window.controller.send(self.send)
        elif self.screenshot and not self.send:
            QTimer.singleShot(300, self.shoot)

    @Slot(str)
    def on_failed(self, message: str) -> None:
        print(f"ember: {message}", file=sys.stderr)
        if self.screenshot:
            self.shoot()

    @Slot(bool)
    def on_generating(self, on: bool) -> None:
        if on:
            return
        controller = self.window.controller
        if self.sent and controller.conversation_id is not None:  # say what arrived (smoke tests read it)
            answer = self.window.store.thread(controller.conversation_id)[-1]
            stored = GenerationMetrics.from_stored(answer.metrics)
            line = stored.summary_line() if stored else ""
            print(f"ember: answer: {len(answer.content)} characters · {line}", file=sys.stderr, flush=True)
        if not self.screenshot:
            return
        if self.window.transcript.rendering:
            self.window.transcript.rendered.connect(self.on_rendered)
        else:
            QTimer.singleShot(200, self.shoot)

    @Slot()
    def on_rendered(self) -> None:
        QTimer.singleShot(200, self.shoot)

    def shoot(self) -> None:
        out = Path(self.screenshot)
        out.parent.mkdir(parents=True, exist_ok=True)
        shot = self.window.screen().grabWindow(self.window.winId())  # the real window's pixels
        if shot.isNull():
            shot = self.window.grab()
        shot.save(str(out))
        print(f"ember: screenshot saved to {out}", file=sys.stderr)
        self.window.api.stop()  # a scripted run quits without asking about the API server
        self.window.close()
