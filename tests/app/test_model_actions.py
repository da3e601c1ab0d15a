"""The window's model actions (app/models/actions.py) have no back-reference to the main window (issue
29): built from the app's context, the model bar they drive and typed callables (no `Any`), they tell
the window and the other features what happened by signals the composition connects; the real window
wires them and still shows what a load and an unload change."""

from __future__ import annotations

import typing
from collections.abc import Callable

from pytestqt.qtbot import QtBot

from ember_chat.app.models import actions
from ember_chat.app.models.actions import ModelActions
from ember_chat.app.models.model_bar import ModelBar
from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.back_references import assert_built_without_the_window, assert_module_reads_no_window
from tests.helpers.window import LOAD_TIMEOUT, load


def test_its_constructor_does_not_take_the_window() -> None:
    assert_built_without_the_window(ModelActions, actions, forbidden=frozenset({"parent"}))
    assert typing.get_type_hints(ModelActions.__init__)["model_bar"] is ModelBar


def test_its_module_never_reads_through_a_window() -> None:
    assert_module_reads_no_window(actions, "dialog_parent")  # (the dialogs' parent: handed to Qt only)


def test_the_window_wires_it_without_handing_itself_over(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    held = [name for name, value in vars(w.models).items() if value is w]
    assert held == ["dialog_parent"]  # (the Qt parent its dialogs stay over; nothing is read from it)
    assert w.models.ctx is w.ctx and w.models.model_bar is w.model_bar


def test_a_load_and_an_unload_reach_the_window_through_the_composition(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """What the model actions once set on the window themselves: the answers' model name, the thinking
    switch of the parameters panel, the last model in the settings, the window's model state."""
    w = make_window()
    load(qtbot, w)
    assert w.model is w.models.model is not None
    assert w.controller.model_name == w.model.name  # (an answer's header)
    assert w.settings.last_model == "tiny.gguf" == w.settings_file.load().last_model
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "none", timeout=LOAD_TIMEOUT):
        w.model_bar.unload.click()
    assert w.model is None and w.models.loaded_name is None
    assert not w.side.params.think.isEnabled() and w.side.params.think.toolTip() == "No model is loaded."
    assert w.settings_file.load().last_model == ""
