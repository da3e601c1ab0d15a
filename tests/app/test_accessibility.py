"""Keyboard-only use and screen readers: every control has an accessible name and description (as a
screen reader reads them, through Qt's accessibility interface), Tab goes around the window in reading
order, the transcript's message actions are reachable and runnable with the keyboard, every shortcut is
listed in Help ▸ Keyboard shortcuts, and a finished answer is announced."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QAccessible, QGuiApplication
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.accessibility import _activate, _focused_link, _missing_names
from tests.helpers.chat_fixtures import seed_long_chat
from tests.helpers.window import load, send, set_max_tokens


def test_every_control_of_the_window_and_its_dialogs_has_a_name_and_description(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    QAccessible.setActive(True)
    w = make_window()
    assert _missing_names(w) == []
    manager = w.models.model_manager()
    assert _missing_names(manager) == []
    w.models.open_connections()
    assert _missing_names(w.models.connections_dialog) == []
    w.models.connections_dialog.close()
    w.show_shortcuts()
    assert _missing_names(w._shortcuts) == []
    w._shortcuts.close()
    w.api.open_dialog()
    assert _missing_names(w.api.dialog) == []
    w.api.dialog.close()
    w.models.open_benchmark()
    assert _missing_names(w.models.benchmark) == []
    w.models.benchmark.close()


def test_tab_goes_around_the_window_in_reading_order(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    load(qtbot, w)
    w.resize(1280, w.height())  # (on the 800 px offscreen screen the side panel hides by itself)
    _activate(qtbot, w)
    w.conversations.new_button.setFocus()
    seen = [QApplication.focusWidget()]
    for _ in range(13):
        qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
        seen.append(QApplication.focusWidget())
    expected = [
        w.conversations.new_button,
        w.conversations.search,
        w.conversations.list,
        w.model_picker,
        w.model_bar.tune,
        w.model_bar.unload,
        w.transcript,  # (the banner's close button only when a message shows)
        w.composer.editor,
        w.composer.attach_button,  # (and an attachment chip's ✕ before it, when there is one)
        w.tools.button,  # the chat's tools (issue 18)
        w.dictation.button,  # the microphone (issue 33)
        w.voice.button,  # voice conversation (issue 33)
        w.composer.button,
        w.side.tabBar(),
    ]
    assert seen == expected
    # and back
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Backtab)
    assert QApplication.focusWidget() is w.composer.button


def test_message_actions_are_reachable_and_runnable_with_the_keyboard(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    load(qtbot, w)
    set_max_tokens(w, 4)
    send(qtbot, w, "keyboard only")
    _activate(qtbot, w)
    t = w.transcript
    question, answer = w.store.thread(w.controller.conversation_id)
    w.focus_pane("transcript")
    assert QApplication.focusWidget() is t
    hrefs = []
    for _ in range(10):
        qtbot.keyClick(t, Qt.Key.Key_Backtab)  # Shift+Tab walks the links from the newest message up
        hrefs.append(_focused_link(t))
    assert hrefs == [
        f"ember:continue/{answer.id}",  # (the answer stopped at the max-tokens limit)
        f"ember:delete/{answer.id}",
        f"ember:compare/{answer.id}",
        f"ember:speak/{answer.id}",  # (read aloud: issue 33)
        f"ember:regenerate/{answer.id}",
        f"ember:copy/{answer.id}",
        f"ember:delete/{question.id}",
        f"ember:compare/{question.id}",
        f"ember:edit/{question.id}",
        f"ember:copy/{question.id}",
    ]
    actions: list[tuple[str, int, int]] = []
    t.action.connect(lambda verb, mid, arg: actions.append((verb, mid, arg)))
    for _ in range(4):
        qtbot.keyClick(t, Qt.Key.Key_Tab)  # and Tab down again
    assert _focused_link(t) == f"ember:copy/{answer.id}"
    qtbot.keyClick(t, Qt.Key.Key_Return)  # Enter runs the focused action: copy the answer
    assert actions[-1] == ("copy", answer.id, 0)
    assert QGuiApplication.clipboard().text() == answer.content
    # past the last link, Tab leaves the transcript for the message box
    for _ in range(5):
        qtbot.keyClick(t, Qt.Key.Key_Tab)
    assert _focused_link(t) == f"ember:continue/{answer.id}"
    qtbot.keyClick(t, Qt.Key.Key_Tab)
    assert QApplication.focusWidget() is w.composer.editor


def test_go_to_shortcuts_move_the_focus(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    _activate(qtbot, w)
    for pane, widget in (
        ("chats", w.conversations.list),
        ("composer", w.composer.editor),
        ("transcript", w.welcome.starter),  # no chat yet: the welcome panel stands in the transcript's place
        ("model", w.model_picker),
        ("search", w.conversations.search),
    ):
        w.focus_pane(pane)
        assert QApplication.focusWidget() is widget, pane
    w.toggle_side_panel()
    w.focus_pane("side")  # a hidden side panel is shown first
    assert w.side.isVisible() and QApplication.focusWidget() is w.side.tabBar()


def test_keyboard_shortcuts_dialog_lists_every_menu_shortcut(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    w.show_shortcuts()
    rows = w._shortcuts.rows()
    keys = [k for k, _ in rows]
    for key in ("Ctrl+N", "Ctrl+R", "Ctrl+E", "F2", "Alt+1", "Alt+3", "Ctrl+/", "Ctrl+Shift+S", "Enter", "Shift+Enter"):
        assert key in keys, key
    assert any("Keyboard shortcuts" in what for _, what in rows)
    # every shortcut of every menu entry is in the list
    listed = set(keys)
    for a in w.findChildren(type(w.side_action)):
        if not a.shortcut().isEmpty() and a.parent() is not None and a.isVisible():
            assert a.shortcut().toString() in listed or a.shortcut().toString() == "", a.text()


def test_a_finished_answer_is_announced_and_an_error_too(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    load(qtbot, w)
    set_max_tokens(w, 4)
    send(qtbot, w, "announce")
    answer = w.store.thread(w.controller.conversation_id)[-1]
    assert w.transcript.last_announcement == f"Ember answered: {answer.content}"
    w.show_error("Something went wrong.")
    assert w.banner.label.accessibleName() == "Something went wrong."
    qtbot.keyClick(w.banner.close_button, Qt.Key.Key_Space)  # the banner closes from the keyboard
    assert not w.banner.isVisible()


def test_long_chat_keyboard_jump_to_old_message(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    cid = seed_long_chat(w.store, 120)
    w.chats.open_conversation(cid)
    w.transcript.finish_rendering()
    assert len(w.transcript.shown_ids()) == 120


def test_ctrl_m_opens_the_model_manager_before_the_models_menu_was_ever_opened(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    _activate(qtbot, w)
    assert w.downloads is not None and w.models.manager is None
    qtbot.keyClick(w, Qt.Key.Key_M, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: w.models.manager is not None and w.models.manager.isVisible(), timeout=5000)
    w.show_shortcuts()
    assert any(k == "Ctrl+M" and "Model Manager" in what for k, what in w._shortcuts.rows())
    w.models.manager.close()


def test_the_buttons_inside_the_search_field_have_names(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    """The search field's leading icon and its clear button are buttons a screen reader reaches."""
    from PySide6.QtWidgets import QToolButton

    QAccessible.setActive(True)
    w = make_window()
    w.conversations.search.setText("x")
    buttons = w.conversations.search.findChildren(QToolButton)
    assert len(buttons) == 2
    for b in buttons:
        iface = QAccessible.queryAccessibleInterface(b)
        assert iface.text(QAccessible.Text.Name).strip() and iface.text(QAccessible.Text.Description).strip()


def test_session_percentiles_are_over_a_bounded_window(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    """A long session keeps the latest samples only: memory and the per-answer sort stay bounded."""
    from ember_chat.app.side_panel.panel import SESSION_ITL_SAMPLES
    from ember_chat.engine.inference.metrics import MetricsRecorder, RunContext

    w = make_window()
    panel = w.side.metrics
    rec = MetricsRecorder(RunContext("m", None, "CPU", 1, 0, 512, None))
    rec.prefill_started(4, 0, rec.t_start_ns)
    rec.token(rec.t_start_ns + 1_000_000, 1)
    m = rec.finish("stop")
    for _ in range(3):
        panel.finish(m, [5.0] * SESSION_ITL_SAMPLES)
    panel.finish(m, [1.0] * 10)
    assert len(panel._itl_samples) == SESSION_ITL_SAMPLES
    assert panel._itl_samples[-1] == 1.0
    assert panel.session_itl.text().startswith("5.0")
