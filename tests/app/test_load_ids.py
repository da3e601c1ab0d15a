"""Loads have ids and cancel events of their own: a Cancel followed by a new load cannot un-cancel the
first one, and the window ignores what a load it has replaced says (picker, badge and the saved
last model all name the model picked last)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.inference.service.engine import EngineService, ServiceListener
from tests.helpers.models_window import WAIT_S, HeldLoads
from tests.helpers.window import LOAD_TIMEOUT


class Outcomes(ServiceListener):
    """What every load ended in, in order: ("loaded", model name) or ("failed", message)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.ends: list[tuple[str, str]] = []

    def loaded(self, model: ModelDescription) -> None:
        with self.cond:
            self.ends.append(("loaded", model.name))
            self.cond.notify_all()

    def load_failed(self, message: str) -> None:
        with self.cond:
            self.ends.append(("failed", message))
            self.cond.notify_all()

    def wait(self, count: int) -> list[tuple[str, str]]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.ends) >= count, WAIT_S), self.ends
            return list(self.ends)


@pytest.fixture
def held() -> Iterator[tuple[EngineService, HeldLoads, Outcomes]]:
    backend = HeldLoads()
    service = EngineService(lambda _ref: backend)
    outcomes = Outcomes()
    service.add_listener(outcomes)
    try:
        yield service, backend, outcomes
    finally:
        backend.release_all()
        service.close()
        assert not service.running


def test_cancel_then_a_new_load_does_not_uncancel_the_first(held: tuple[EngineService, HeldLoads, Outcomes]) -> None:
    service, backend, outcomes = held
    service.load(LoadConfig(Path("one.gguf")))
    assert backend.entered("one.gguf").wait(WAIT_S)  # load 1 is running (held)
    service.cancel_load()  # the user's Cancel …
    service.load(LoadConfig(Path("two.gguf")))  # … then a new pick, before load 1 noticed
    backend.release("one.gguf", "two.gguf")
    ends = outcomes.wait(2)
    assert ends[0] == ("failed", "Loading one.gguf was cancelled.")  # load 1 still ends cancelled
    assert ends[1] == ("loaded", "two.gguf")  # load 2 completes
    assert service.model is not None and service.model.name == "two.gguf"


def test_each_load_has_an_id_and_its_own_cancel(held: tuple[EngineService, HeldLoads, Outcomes]) -> None:
    service, backend, outcomes = held
    seen: list[tuple[str, int, str]] = []
    done = threading.Event()

    class ById(ServiceListener):
        def loaded_with_id(self, load_id: int, model: ModelDescription) -> None:
            seen.append(("loaded", load_id, model.name))
            done.set()

        def load_failed_with_id(self, load_id: int, message: str) -> None:
            seen.append(("failed", load_id, message))

    service.add_listener(ById())
    first = service.load(LoadConfig(Path("one.gguf")))
    assert backend.entered("one.gguf").wait(WAIT_S)
    second = service.load(LoadConfig(Path("two.gguf")))
    assert first != second
    service.cancel_load(first)  # only the first: the second, already waiting, is not touched
    backend.release("one.gguf", "two.gguf")
    assert done.wait(WAIT_S)
    assert seen == [("failed", first, "Loading one.gguf was cancelled."), ("loaded", second, "two.gguf")]
    # the listeners without ids still hear both ends
    assert outcomes.wait(2) == [("failed", "Loading one.gguf was cancelled."), ("loaded", "two.gguf")]


def pick(w: MainWindow, name: str) -> None:
    """Choose `name` in the model picker, as the user does."""
    index = w.model_picker.findData(name)
    assert index > 0, name
    w.model_picker.setCurrentIndex(index)
    w.model_picker.activated.emit(index)


def test_picking_b_while_a_loads_ends_with_b(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: object
) -> None:
    backend = HeldLoads(threads={"tiny.gguf": 3, "other.gguf": 5})
    w = make_window(lambda _ref: backend)
    try:
        (w.library.models_dir / "other.gguf").write_bytes((w.library.models_dir / "tiny.gguf").read_bytes())
        with qtbot.waitSignal(w.models_listed, timeout=LOAD_TIMEOUT):  # listed off the GUI thread
            w.models.reload_models()
        pick(w, "tiny.gguf")
        # A is loading (the window works out what to load off the GUI thread: wait with its event loop running)
        qtbot.waitUntil(backend.entered("tiny.gguf").is_set, timeout=LOAD_TIMEOUT)
        a_load = w.bridge.load_id
        pick(w, "other.gguf")  # B, before A finishes
        qtbot.waitUntil(lambda: w.bridge.load_id != a_load, timeout=LOAD_TIMEOUT)  # B went to the engine
        backend.release("tiny.gguf", "other.gguf")
        qtbot.waitUntil(lambda: w.model is not None and w.model.name == "other.gguf", timeout=LOAD_TIMEOUT)
        # everything the window says about A arrived before B's own result (one engine thread, queued
        # signals in order): what it shows now is final
        assert w.controller.model_ready
        assert w.model_picker.currentData() == "other.gguf"
        assert w.model_bar.badge.text().startswith("CPU · 5 threads")
        assert w.settings.last_model == "other.gguf"
        assert w.settings_file.load().last_model == "other.gguf"
    finally:
        backend.release_all()


def test_cancel_then_pick_loads_the_new_pick_only(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    backend = HeldLoads(threads={"tiny.gguf": 3, "other.gguf": 5})
    w = make_window(lambda _ref: backend)
    try:
        (w.library.models_dir / "other.gguf").write_bytes((w.library.models_dir / "tiny.gguf").read_bytes())
        with qtbot.waitSignal(w.models_listed, timeout=LOAD_TIMEOUT):
            w.models.reload_models()
        pick(w, "tiny.gguf")
        qtbot.waitUntil(backend.entered("tiny.gguf").is_set, timeout=LOAD_TIMEOUT)
        a_load = w.bridge.load_id
        w.model_bar.unload.click()  # Cancel (the button says so while loading)
        pick(w, "other.gguf")
        qtbot.waitUntil(lambda: w.bridge.load_id != a_load, timeout=LOAD_TIMEOUT)
        backend.release("tiny.gguf", "other.gguf")
        qtbot.waitUntil(lambda: w.model is not None and w.model.name == "other.gguf", timeout=LOAD_TIMEOUT)
        assert w.model_picker.currentData() == "other.gguf"
        assert w.settings_file.load().last_model == "other.gguf"
        assert not w.banner.isVisible() or "tiny.gguf" not in w.banner.text()  # nothing stale shown
    finally:
        backend.release_all()
