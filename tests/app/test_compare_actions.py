"""The comparison's controller (app/compare/actions.py) has no back-reference to the main window (issue
29): it is built from the app's context and the exact collaborators it reads or asks, typed (no `Any`),
and its module never reaches through a window (`self.w.…`, `self.window.…`). The real window wires it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.compare import actions
from ember_chat.app.compare.actions import CompareActions
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.back_references import assert_built_without_the_window, assert_module_reads_no_window
from tests.helpers.compare_window import running_comparison
from tests.helpers.sse_server import FakeOpenAI


@pytest.fixture
def paths(endless_models_paths: AppPaths) -> AppPaths:
    """Two tiny models that never end on their own: tests/app/conftest.py's endless_models_paths."""
    return endless_models_paths


def test_its_constructor_does_not_take_the_window() -> None:
    assert_built_without_the_window(CompareActions, actions, forbidden=frozenset({"parent"}))


def test_its_module_never_reads_through_a_window() -> None:
    assert_module_reads_no_window(actions, "_dialog_parent")  # (the dialog's parent: handed to Qt only)


def test_the_window_wires_it_without_handing_itself_over(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    held = [name for name, value in vars(w.compare).items() if value is w]
    assert held == ["_dialog_parent"]  # (the Qt parent the dialog opens over; nothing is read from it)
    assert w.compare.ctx is w.ctx and w.compare.chat is w.controller and w.compare.params is w.side.params


def test_closing_the_window_mid_run_stops_looking_for_the_prompt(
    qtbot: QtBot, make_window: Callable[..., MainWindow], peer: FakeOpenAI
) -> None:
    w = make_window()
    running_comparison(qtbot, w, peer)  # (two stalled remote models: only a stop or the close ends it)
    assert w.compare._watch.isActive()
    w.close()  # the runner drops the run's end: nothing is left to stop the prompt's watch but the close
    assert w.compare.join(30) and not w.compare.running and not w.compare._watch.isActive()
