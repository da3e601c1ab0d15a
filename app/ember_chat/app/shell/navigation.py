"""Keyboard navigation of the main window: the Tab order (reading order) and View ▸ Go to."""

from __future__ import annotations

from itertools import pairwise
from typing import Protocol

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QWidget

from ember_chat.app.chat_list.view import ConversationList
from ember_chat.app.conversation.composer import Composer
from ember_chat.app.models.model_bar import ModelBar
from ember_chat.app.shell.banner import Banner
from ember_chat.app.shell.centre import CentrePages
from ember_chat.app.shell.welcome import WelcomePanel
from ember_chat.app.side_panel.panel import SidePanel
from ember_chat.app.transcript.view import TranscriptView


class NavigationHost(Protocol):
    """The parts of the window navigation moves between (the window satisfies it)."""

    conversations: ConversationList
    centre_stack: CentrePages
    welcome: WelcomePanel
    transcript: TranscriptView
    composer: Composer
    side: SidePanel
    model_picker: QComboBox
    model_bar: ModelBar
    banner: Banner

    def toggle_side_panel(self) -> None: ...


def set_tab_order(w: NavigationHost) -> None:
    """Tab goes around the window as it reads: chats, model bar, transcript, message box, side panel."""
    chain = [
        w.conversations.new_button,
        w.conversations.search,
        w.conversations.scope,  # (where the search looks: shown while there is a project)
        w.conversations.list,
        w.model_picker,
        w.model_bar.tune,
        w.model_bar.unload,
        w.banner.close_button,
        w.transcript,
        w.composer.editor,  # (one Tab from the transcript; then the chips' ✕, the 📎 button, Send)
        w.composer.attach_button,
        w.dictation.button,  # (the microphone: voice/dictation.py)
        w.voice.button,  # (voice conversation: voice/conversation.py)
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
