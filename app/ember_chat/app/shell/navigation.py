"""Keyboard navigation of the main window: the Tab order (reading order) and View ▸ Go to."""

from __future__ import annotations

from itertools import pairwise
from typing import Any, Protocol

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget


class NavigationHost(Protocol):
    """The parts of the window navigation moves between (the window satisfies it)."""

    conversations: Any
    centre_stack: Any
    welcome: Any
    transcript: Any
    composer: Any
    side: Any
    model_picker: Any
    model_bar: Any
    banner: Any

    def toggle_side_panel(self) -> None: ...


def set_tab_order(w: NavigationHost) -> None:
    """Tab goes around the window as it reads: chats, model bar, transcript, message box, side panel."""
    chain = [
        w.conversations.new_button,
        w.conversations.search,
        w.conversations.list,
        w.model_picker,
        w.model_bar.tune,
        w.model_bar.unload,
        w.banner.close_button,
        w.transcript,
        w.composer.editor,  # (one Tab from the transcript; then the chips' ✕, the 📎 button, Send)
        w.composer.attach_button,
        w.composer.button,
        w.side.tabBar(),
    ]
    for a, b in pairwise(chain):
        QWidget.setTabOrder(a, b)


def focus_pane(w: NavigationHost, pane: str) -> None:
    """Move the keyboard focus to a part of the window: chats, search, transcript, composer, side, model."""
    if pane == "side" and not w.side.isVisible():
        w.toggle_side_panel()
    target = {
        "chats": w.conversations.list,
        "search": w.conversations.search,
        "transcript": w.centre_stack.currentWidget(),  # (the welcome panel before the first chat)
        "composer": w.composer.editor,
        "side": w.side.tabBar(),
        "model": w.model_picker,
    }[pane]
    if target is w.welcome:
        target = next(b for b in (w.welcome.starter, w.welcome.manager) if b.isVisible())
    target.setFocus(Qt.FocusReason.ShortcutFocusReason)
