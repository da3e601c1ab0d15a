"""A chat's tools in the window (`window.tools.choices`): the Tools button by the message box (how many
tools the chat has on, about how many tokens their definitions take, the popup to tick them), the
choices kept with each chat (ConversationStore.chat_tools / set_chat_tools), and the chat's tool session
the controller asks for before an answer (`controller.tool_session_for`, given WindowTools.session_for
by the composition). The popup lists the chat's "always allow" grants with a Revoke button each
(`revoke_always`).

Built from the context (the chat store, the notifier), what it reads of the window's tools (ToolsState,
which tools/actions.WindowTools meets), the message box's row the button sits in (ComposerRow) and the
chat on screen (a callable); the composition connects the conversation's `chat_created` (a new chat's
first message) to `on_chat_created` and its `thread_shown` to `on_thread_shown`. It never holds the
window.

A new chat starts with the tools of the user's last choices (ToolsConfig.new_chats in tools.json): each
tool or server turned on or off in the popup, in any chat, is turned on or off there too, and a server
just added is on (its "All" switch) in the chat shown and in new chats. Only the user's own changes go
there, never a chat's stored choices (an imported chat's came from a file). A new chat's choices go to
the chat when its first message creates it; "Make the model call a tool first" is for that chat alone.
A new chat in a project starts with the project's tools instead (`start_new_chat_with`, which the
composition calls when a new chat opens): the button shows them, and a change there is that chat's.
Every call still asks before it runs unless the user allowed it: turning tools on grants no consent."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QBoxLayout, QLayout, QWidget

from ember_chat.app.context import AppContext
from ember_chat.app.tools.tools_button import PopupContent, ToolChoice, ToolGroup, ToolsButton
from ember_chat.engine.core.tools import ChatTools
from ember_chat.engine.errors import StoreError
from ember_chat.engine.tools.config import BUILTIN_SOURCE, ToolsConfig
from ember_chat.engine.tools.registry import ToolEntry, ToolRegistry, tool_tokens_estimate
from ember_chat.engine.tools.session import ChatToolSession

BOX_ROOM = 440  # the least width the message box keeps before the Tools button shows its whole text


class ToolsState(Protocol):
    """What a chat's choices read of the window's tools (tools/actions.WindowTools meets it; a protocol,
    so this module and the one that builds it do not import each other)."""

    config: ToolsConfig
    registry: ToolRegistry
    listing: bool  # a listing is under way

    @property
    def listed_sources(self) -> set[str]: ...
    def server_state(self, name: str) -> tuple[str, str | None]: ...
    def remember_new_chats(self, new: ChatTools) -> None: ...


@dataclass(frozen=True)
class ComposerRow:
    """The message box the Tools button sits in (conversation/composer.Composer's parts, which this
    feature may not import: the composition hands them over)."""

    box: QWidget  # the message box: its width says how much the button's text may take
    after: QWidget  # the button goes right after it, in its row and in the Tab order (the attach button)
    editor: QWidget  # the text box, which keeps BOX_ROOM
    tab_next: QWidget  # where Tab goes from the button (Send)


class ChatToolChoices(QObject):
    def __init__(
        self,
        ctx: AppContext,
        tools: ToolsState,
        row: ComposerRow,
        shown_chat: Callable[[], int | None],
        parent: QObject,
    ) -> None:
        """`shown_chat`: the conversation the window shows (None: a new chat, not created yet)."""
        super().__init__(parent)
        self.ctx = ctx
        self.t = tools
        self.row = row
        self._shown_chat = shown_chat
        self._draft_require = False  # "call a tool first" for the new chat, until its first message
        self._draft: ChatTools | None = None  # a new chat's own tools (a project's), until its first message
        self.button = ToolsButton()
        self.button.content = self.popup_content
        self.button.tool_toggled.connect(self.set_tool_on)
        self.button.server_toggled.connect(self.set_server_on)
        self.button.require_toggled.connect(self.set_require_call)
        self.button.grant_revoked.connect(self.revoke_always)
        self._row = _insert_by(row.after, self.button)
        row.box.installEventFilter(self)  # (its width: the button's text, see _fit_button)
        QTimer.singleShot(0, self._chain_tab)  # after the window's own Tab order is set

    def _chain_tab(self) -> None:
        QWidget.setTabOrder(self.row.after, self.button)
        QWidget.setTabOrder(self.button, self.row.tab_next)

    def chat_tools(self) -> ChatTools:
        """The tool choices of the chat the window shows (for a new chat: the last choices)."""
        cid = self._shown_chat()
        if cid is None:
            return replace(self._draft or self.t.config.new_chats, require_call=self._draft_require)
        try:
            return self.ctx.store.chat_tools(cid)
        except (KeyError, sqlite3.Error, StoreError):
            return ChatTools()

    def start_new_chat_with(self, servers: frozenset[str] | None) -> None:
        """The new chat on screen starts with these tool servers' tools (a project's; each call still asks
        first), not the last choices; None: with the last choices (a new chat in no project)."""
        self._draft = None if servers is None else ChatTools(servers=servers)
        self.update_button()
        self.button.refresh_popup()  # (when it is open)

    def enabled_entries(self, chat: ChatTools) -> list[ToolEntry]:
        on = self.t.registry.keys_on(chat)
        return [e for e in self.t.registry.entries() if e.key in on]

    # ----- a chat's tools
    def session_for(self, conversation_id: int) -> ChatToolSession | None:
        """The chat's tool session for its next answer; None when it has no tool on (or none of its
        tools can be offered now: the banner says why)."""
        try:
            chat = self.ctx.store.chat_tools(conversation_id)
        except (KeyError, sqlite3.Error, StoreError):
            return None
        if not chat.enabled and not chat.servers:
            return None
        if not self.t.registry.keys_on(chat) & {e.key for e in self.t.registry.entries()}:
            self.ctx.notifier.show_notice(
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
        """Turn a tool on or off in the chat the window shows (kept with the chat), and for new chats."""
        entry = self.t.registry.entry(key)
        source = entry.source if entry is not None else key.rsplit("/", 1)[0]
        siblings = self._keys_of(source)
        self._keep(_tool_on(self.chat_tools(), key, on, source, siblings))
        if self._shown_chat() is not None or self._draft is not None:
            self._remember(_tool_on(self.t.config.new_chats, key, on, source, siblings))
        self.button.sync_popup(self.popup_content())  # (its source's "All" switch)

    def set_server_on(self, source: str, on: bool) -> None:
        """Every tool of `source` on (those it lists later too) or off in the chat the window shows, and
        for new chats (the popup's "All" switch)."""
        keys = self._keys_of(source)
        self._keep(_server_on(self.chat_tools(), source, on, keys))
        if self._shown_chat() is not None or self._draft is not None:
            self._remember(_server_on(self.t.config.new_chats, source, on, keys))
        self.button.sync_popup(self.popup_content())

    def servers_added(self, names: frozenset[str]) -> None:
        """Servers just added in Settings ▸ Tools: their tools are on in the chat shown and in new chats
        (each call still asks first)."""
        if self._shown_chat() is not None or self._draft is not None:
            chat = self.chat_tools()
            self._keep(replace(chat, servers=chat.servers | names))
        new = self.t.config.new_chats
        self._remember(replace(new, servers=new.servers | names))

    def _keys_of(self, source: str) -> frozenset[str]:
        return frozenset(e.key for e in self.t.registry.entries() if e.source == source)

    def _remember(self, new: ChatTools) -> None:
        """What new chats start with: the user's change, made to the last choices (not to a chat's)."""
        self.t.remember_new_chats(ChatTools(new.enabled, servers=new.servers))

    def set_require_call(self, on: bool) -> None:
        """The model must call a tool first in each answer of the chat the window shows (kept with it)."""
        if self._shown_chat() is None:
            self._draft_require = on  # (the new chat's alone: new chats do not inherit it)
            self.update_button()
            return
        self._keep(replace(self.chat_tools(), require_call=on))

    def revoke_always(self, key: str) -> None:
        """Take back a tool's "always allow" in the chat the window shows: its calls ask again (from the
        next generation on: a continuation reads the chat's choices again)."""
        chat = self.chat_tools()
        self._keep(replace(chat, always=chat.always - {key}))
        self.button.refresh_popup()

    def _keep(self, new: ChatTools) -> None:
        cid = self._shown_chat()
        if cid is None:
            self._draft_require = new.require_call
            if self._draft is not None:  # (a project's new chat: its own, until made)
                self._draft = replace(new, require_call=False)
            else:
                self._remember(new)
        else:
            try:
                self.ctx.store.set_chat_tools(cid, new)
            except (KeyError, sqlite3.Error, StoreError, OSError) as exc:
                self.ctx.notifier.show_error(
                    self.tr("Ember could not save this chat's tools ({reason}); try again.").format(reason=exc)
                )
        self.update_button()

    def on_chat_created(self, conversation_id: int) -> None:
        """The new chat's first message created it (the conversation's chat_created): the new chat's tools
        go with it — with this chat only, never one another program, an import or a second window made
        meanwhile (a chat's own date, from a file, says nothing of who made it)."""
        draft = replace(self._draft or self.t.config.new_chats, require_call=self._draft_require)
        self._draft_require = False
        self._draft = None
        if draft == ChatTools():
            return
        with contextlib.suppress(KeyError, sqlite3.Error, StoreError):
            if self.ctx.store.chat_tools(conversation_id) == ChatTools():
                self.ctx.store.set_chat_tools(conversation_id, draft)

    def on_thread_shown(self, *_args: object) -> None:
        """The window shows a chat (the conversation's thread_shown): the button says its tools."""
        self.update_button()

    def on_tools_changed(self) -> None:
        """The configuration or the tools listed changed (WindowTools.changed)."""
        self.update_button()
        self.button.refresh_popup()  # (when it is open)

    def update_button(self) -> None:
        chat = self.chat_tools()
        entries = self.enabled_entries(chat)
        self.button.set_summary(len(entries), tool_tokens_estimate([e.spec for e in entries]), chat.require_call)
        self._fit_button()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Qt override
        if watched is self.row.box and event.type() == QEvent.Type.Resize:
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
            if item.widget() not in (self.row.editor, self.button) and not item.isEmpty():
                others += item.sizeHint().width() + max(0, row.spacing())
        room = self.row.box.contentsRect().width() - margins.left() - margins.right() - others
        self.button.set_compact(room - self.button.full_width() - max(0, row.spacing()) < BOX_ROOM)

    def popup_content(self) -> PopupContent:
        chat = self.chat_tools()
        entries = self.t.registry.entries()
        on_keys = self.t.registry.keys_on(chat)
        groups: list[ToolGroup] = []
        for source in [BUILTIN_SOURCE, *(s.name for s in self.t.config.servers)]:
            mine = [e for e in entries if e.source == source]
            choices = tuple(
                ToolChoice(e.key, e.original_name, e.spec.description, e.spec.read_only, e.key in on_keys) for e in mine
            )
            all_on = source in chat.servers
            if source == BUILTIN_SOURCE:
                if choices:
                    groups.append(ToolGroup(source, tools=choices, all_on=all_on))
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
            groups.append(ToolGroup(source, status, failed, choices, all_on))
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
        title = self.tr("Tools in this chat") if self._shown_chat() is not None else self.tr("Tools for the new chat")
        allowed = []
        for key in sorted(chat.always):
            entry = self.t.registry.entry(key)
            name = f"{entry.original_name} ({entry.source})" if entry is not None else key  # (its server is gone)
            allowed.append(ToolChoice(key, name, entry.spec.description if entry is not None else ""))
        tokens = tool_tokens_estimate([e.spec for e in on])
        return PopupContent(title, tuple(groups), tokens, notes, chat.require_call, tuple(allowed))


def _tool_on(chat: ChatTools, key: str, on: bool, source: str, siblings: frozenset[str]) -> ChatTools:
    """`chat` with the tool `key` (of `source`, whose tools are `siblings`) on or off. Off, where the chat
    has all of its source's tools: the source's others stay on, one by one. Turned off, its "always
    allow" goes: turned on again, it asks again."""
    if on:
        return replace(chat, enabled=chat.enabled | {key})
    servers, enabled = chat.servers, chat.enabled
    if source in servers:
        servers, enabled = servers - {source}, enabled | siblings
    return replace(chat, enabled=enabled - {key}, servers=servers, always=chat.always - {key})


def _server_on(chat: ChatTools, source: str, on: bool, keys: frozenset[str]) -> ChatTools:
    """`chat` with every tool of `source` (listed now: `keys`; later ones too) on, or all off."""
    if on:
        return replace(chat, servers=chat.servers | {source}, enabled=chat.enabled - keys)
    return replace(chat, servers=chat.servers - {source}, enabled=chat.enabled - keys, always=chat.always - keys)


def _insert_by(neighbour: QWidget, widget: QWidget) -> QBoxLayout:
    """Put `widget` right after `neighbour` in the layout that holds it (the message box's row); that row."""
    parent = neighbour.parentWidget()
    layouts: list[QLayout] = [parent.layout()] if parent is not None and parent.layout() is not None else []
    while layouts:
        layout = layouts.pop()
        index = layout.indexOf(neighbour)
        if index >= 0 and isinstance(layout, QBoxLayout):
            layout.insertWidget(index + 1, widget)
            return layout
        layouts.extend(layout.itemAt(i).layout() for i in range(layout.count()) if layout.itemAt(i).layout())
    raise RuntimeError("the message box's row was not found")
