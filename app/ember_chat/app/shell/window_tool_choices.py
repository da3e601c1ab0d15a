"""A chat's tools in the window (`window.tools.choices`): the Tools button by the message box (how many
tools the chat has on, about how many tokens their definitions take, the popup to tick them), the
choices kept with each chat (ConversationStore.chat_tools / set_chat_tools), and the chat's tool session
the controller asks for before an answer (`controller.tool_session_for`). The popup lists the chat's
"always allow" grants with a Revoke button each (`revoke_always`).

A chat chooses its tools before it exists (a new chat): the choice is kept as a draft and goes to the
chat when its first message creates it; the next new chat starts with none."""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QBoxLayout, QWidget

from ember_chat.app.tools.tools_button import PopupContent, ToolChoice, ToolGroup, ToolsButton
from ember_chat.engine.core.tools import ChatTools
from ember_chat.engine.errors import StoreError
from ember_chat.engine.tools.config import BUILTIN_SOURCE
from ember_chat.engine.tools.registry import ToolEntry, tool_tokens_estimate
from ember_chat.engine.tools.session import ChatToolSession

if TYPE_CHECKING:
    from ember_chat.app.shell.main_window import MainWindow
    from ember_chat.app.shell.window_tools import WindowTools


BOX_ROOM = 440  # the least width the message box keeps before the Tools button shows its whole text


class ChatToolChoices(QObject):
    def __init__(self, window: MainWindow, tools: WindowTools) -> None:
        super().__init__(tools)
        self.w = window
        self.t = tools
        self._draft = ChatTools()  # a new chat's choices, until its first message creates it
        self._shown: int | None = None  # the conversation the window shows
        self.button = ToolsButton()
        self.button.content = self.popup_content
        self.button.tool_toggled.connect(self.set_tool_on)
        self.button.require_toggled.connect(self.set_require_call)
        self.button.grant_revoked.connect(self.revoke_always)
        self.button.settings_requested.connect(tools.open_dialog)
        self._row = _insert_by(window.composer.attach_button, self.button)
        window.composer.installEventFilter(self)  # (its width: the button's text, see _fit_button)
        QTimer.singleShot(0, self._chain_tab)  # after the window's own Tab order is set
        window.controller.thread_shown.connect(self._on_thread_shown)
        tools.changed.connect(self._on_tools_changed)

    def _chain_tab(self) -> None:
        QWidget.setTabOrder(self.w.composer.attach_button, self.button)
        QWidget.setTabOrder(self.button, self.w.composer.button)

    def chat_tools(self) -> ChatTools:
        """The tool choices of the chat the window shows (the draft for a new chat)."""
        cid = self.w.controller.conversation_id
        if cid is None:
            return self._draft
        try:
            return self.w.store.chat_tools(cid)
        except (KeyError, sqlite3.Error, StoreError):
            return ChatTools()

    def enabled_entries(self, chat: ChatTools) -> list[ToolEntry]:
        return [e for e in self.t.registry.entries() if e.key in chat.enabled]

    # ----- a chat's tools
    def session_for(self, conversation_id: int) -> ChatToolSession | None:
        """The chat's tool session for its next answer; None when it has no tool on (or none of its
        tools can be offered now: the banner says why)."""
        try:
            chat = self.w.store.chat_tools(conversation_id)
        except (KeyError, sqlite3.Error, StoreError):
            return None
        if not chat.enabled:
            return None
        if not any(self.t.registry.entry(key) is not None for key in chat.enabled):
            self.w.show_notice(
                self.tr("The tools on in this chat are still starting, so this answer goes without them.")
                if self.t.listing
                else self.tr(
                    "None of the tools on in this chat is available now (their server is off or did not start: "
                    "see Settings ▸ Tools), so this answer goes without them."
                )
            )
            return None
        return ChatToolSession(self.t.registry, chat, self.t.config.never_ask, self.t.config.max_calls)

    def set_tool_on(self, key: str, on: bool) -> None:
        """Turn a tool on or off in the chat the window shows (kept with the chat)."""
        chat = self.chat_tools()
        enabled = chat.enabled | {key} if on else chat.enabled - {key}
        always = chat.always if on else chat.always - {key}  # turned on again: it asks again
        self._keep(replace(chat, enabled=frozenset(enabled), always=frozenset(always)))

    def set_require_call(self, on: bool) -> None:
        """The model must call a tool first in each answer of the chat the window shows (kept with it)."""
        self._keep(replace(self.chat_tools(), require_call=on))

    def revoke_always(self, key: str) -> None:
        """Take back a tool's "always allow" in the chat the window shows: its calls ask again (from the
        next generation on: a continuation reads the chat's choices again)."""
        chat = self.chat_tools()
        self._keep(replace(chat, always=chat.always - {key}))
        self.button.refresh_popup()

    def _keep(self, new: ChatTools) -> None:
        cid = self.w.controller.conversation_id
        if cid is None:
            self._draft = new
        else:
            try:
                self.w.store.set_chat_tools(cid, new)
            except (KeyError, sqlite3.Error, StoreError, OSError) as exc:
                self.w.show_error(
                    self.tr("Ember could not save this chat's tools ({reason}); try again.").format(reason=exc)
                )
        self.update_button()

    def _on_thread_shown(self, *_args: Any) -> None:
        cid = self.w.controller.conversation_id
        if cid is not None and self._shown is None and cid != self._shown and self._draft.enabled:
            # the first message of a new chat created it: the tools chosen before go with it
            with contextlib.suppress(KeyError, sqlite3.Error, StoreError):
                if self.w.store.chat_tools(cid) == ChatTools() and len(self.w.store.thread(cid)) <= 1:
                    self.w.store.set_chat_tools(cid, self._draft)
                    self._draft = ChatTools()
        self._shown = cid
        self.update_button()

    def _on_tools_changed(self) -> None:
        self.update_button()
        self.button.refresh_popup()  # (when it is open)

    def update_button(self) -> None:
        chat = self.chat_tools()
        entries = self.enabled_entries(chat)
        self.button.set_summary(len(entries), tool_tokens_estimate([e.spec for e in entries]), chat.require_call)
        self._fit_button()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Qt override
        if watched is self.w.composer and event.type() == QEvent.Type.Resize:
            self._fit_button()
        return False

    def _fit_button(self) -> None:
        """The Tools button shows its whole text ("Tools (3) · ~1.2k tokens · must call") only where the
        message box keeps BOX_ROOM beside it, else the count alone (the rest in its tooltip): at 1024 px
        the whole text squeezed the box to a third of the row."""
        row = self._row
        margins = row.contentsMargins()
        others = 0
        for i in range(row.count()):
            item = row.itemAt(i)
            if item.widget() not in (self.w.composer.editor, self.button) and not item.isEmpty():
                others += item.sizeHint().width() + max(0, row.spacing())
        room = self.w.composer.contentsRect().width() - margins.left() - margins.right() - others
        self.button.set_compact(room - self.button.full_width() - max(0, row.spacing()) < BOX_ROOM)

    def popup_content(self) -> PopupContent:
        chat = self.chat_tools()
        entries = self.t.registry.entries()
        groups: list[ToolGroup] = []
        for source in [BUILTIN_SOURCE, *(s.name for s in self.t.config.servers)]:
            mine = [e for e in entries if e.source == source]
            choices = tuple(
                ToolChoice(e.key, e.original_name, e.spec.description, e.spec.read_only, e.key in chat.enabled)
                for e in mine
            )
            if source == BUILTIN_SOURCE:
                if choices:
                    groups.append(ToolGroup(source, tools=choices))
                continue
            state, error = self.t.server_state(source)
            if state == "off":
                continue
            status, failed = "", False
            if not choices:
                if state == "failed":
                    status, failed = error or self.tr("It did not start: see Settings ▸ Tools."), True
                elif state in ("starting", "stopped") and source not in self.t.listed_sources:
                    status = self.tr("Starting…")
                else:
                    status = self.tr("It offers no tools.")
            groups.append(ToolGroup(source, status, failed, choices))
        known = {e.key for e in entries}
        missing = sorted(k for k in chat.enabled if k not in known)
        notes = ()
        if missing and not self.t.listing:
            notes = (
                self.tr("On in this chat but not available now (their server is off, failed or gone): {tools}.").format(
                    tools=", ".join(missing)
                ),
            )
        on = self.enabled_entries(chat)
        title = (
            self.tr("Tools in this chat")
            if self.w.controller.conversation_id is not None
            else self.tr("Tools for the new chat")
        )
        allowed = []
        for key in sorted(chat.always):
            entry = self.t.registry.entry(key)
            name = f"{entry.original_name} ({entry.source})" if entry is not None else key  # (its server is gone)
            allowed.append(ToolChoice(key, name, entry.spec.description if entry is not None else ""))
        tokens = tool_tokens_estimate([e.spec for e in on])
        return PopupContent(title, tuple(groups), tokens, notes, chat.require_call, tuple(allowed))


def _insert_by(neighbour: QWidget, widget: QWidget) -> QBoxLayout:
    """Put `widget` right after `neighbour` in the layout that holds it (the message box's row); that row."""
    parent = neighbour.parentWidget()
    layouts: list[Any] = [parent.layout()] if parent is not None and parent.layout() is not None else []
    while layouts:
        layout = layouts.pop()
        index = layout.indexOf(neighbour)
        if index >= 0 and isinstance(layout, QBoxLayout):
            layout.insertWidget(index + 1, widget)
            return layout
        layouts.extend(layout.itemAt(i).layout() for i in range(layout.count()) if layout.itemAt(i).layout())
    raise RuntimeError("the message box's row was not found")
