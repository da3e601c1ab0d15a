"""The comparison's controller (app/compare/actions.py) has no back-reference to the main window (issue
29): it is built from the app's context and the exact collaborators it reads or asks, typed (no `Any`),
and its module never reaches through a window (`self.w.…`, `self.window.…`). The real window wires it."""

from __future__ import annotations

import ast
import inspect
import typing
from collections.abc import Callable

from pytestqt.qtbot import QtBot

from ember_chat.app.compare import actions
from ember_chat.app.compare.actions import CompareActions
from ember_chat.app.context import AppContext
from ember_chat.app.shell.main_window import MainWindow
from tests.app.test_compare_window import make_window, paths, peer, running_comparison
from tests.helpers.sse_server import FakeOpenAI

__all__ = ["make_window", "paths", "peer"]  # fixtures


def test_its_constructor_does_not_take_the_window() -> None:
    parameters = inspect.signature(CompareActions.__init__).parameters
    assert not {"window", "w", "main_window", "parent"} & set(parameters)
    hints = typing.get_type_hints(CompareActions.__init__)
    assert set(hints) == {*parameters} - {"self"} | {"return"}  # every parameter typed
    assert hints["ctx"] is AppContext
    assert all(hint is not typing.Any and "MainWindow" not in repr(hint) for hint in hints.values())


def test_its_module_never_reads_through_a_window() -> None:
    tree = ast.parse(inspect.getsource(actions))
    attributes = [node for node in ast.walk(tree) if isinstance(node, ast.Attribute)]
    assert [a.attr for a in attributes if a.attr in ("w", "window")] == []
    # the dialog's parent is handed to Qt, never read from
    read = [a.attr for a in attributes if isinstance(a.value, ast.Attribute) and a.value.attr == "_dialog_parent"]
    assert read == []
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert "Any" not in names and "MainWindow" not in names


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
