"""The window's tools, wired (`window.tools`): tools.json (ToolsConfig), the MCP servers (McpManager), the
tools they and the built-in tools offer now (ToolRegistry), the host of Settings ▸ Tools; the Tools button
and each chat's choices are its `choices` (tools/choices.py).

Nothing here waits on the GUI thread: tools.json and the keychain are written on one ordered worker (a
later save never lands before an earlier one), the MCP client takes each new configuration on another
(stopping a server that is still starting can take until its start timeout: that holds up no save),
starting and listing servers runs on the task runner (a server that hangs at start holds a worker, never
the window). What the window shows comes from memory: the last listing, and each server's state as the
MCP client keeps it.

Servers start on demand: each server's tools are remembered between launches (mcp-tools-cache.json in
the data folder, engine/tools/tools_cache.py), so at start the window offers them without starting any
server process; a server starts when one of its tools is called, and one with no tools remembered (just
added, or its settings changed) when the Tools popup or Settings ▸ Tools opens, when it is added, or when
a chat with its tools on is about to answer. Each fresh list replaces the remembered one.

Built from the context (the chat store, the notifier, the data folder), the config folder, the widget
its Settings page stays over, the message box's row the Tools button goes in and the chat on screen;
the composition gives the conversation's controller `session_for` and connects its `thread_shown` to
`choices.on_thread_shown`. It never holds the window."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QWidget

from ember_chat.app.context import AppContext
from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.app.qt.settings_page import show_settings_page
from ember_chat.app.tools.choices import ChatToolChoices, ComposerRow
from ember_chat.engine.core.tools import ChatTools, ToolProvider
from ember_chat.engine.errors import EmberError, InvalidParameter, StoreError
from ember_chat.engine.storage.secrets import SecretStore
from ember_chat.engine.tools.builtin import BuiltinTools
from ember_chat.engine.tools.config import (
    BUILTIN_SOURCE,
    BuiltinToolsConfig,
    McpServerConfig,
    ToolsConfig,
    ToolsConfigFile,
    clear_header_secrets,
    header_secret,
    header_secret_key,
    move_headers_to_keychain,
    save_header_secret,
)
from ember_chat.engine.tools.mcp_client import McpManager
from ember_chat.engine.tools.registry import ToolEntry, ToolRegistry
from ember_chat.engine.tools.session import ChatToolSession
from ember_chat.engine.tools.tools_cache import CACHE_FILE, ToolsCache, listing_plan

if TYPE_CHECKING:
    from ember_chat.app.tools.settings_dialog import ToolsDialog

TOOLS_FILE = "tools.json"
SAVE_WAIT_S = 3.0  # at quit, for the last change to reach tools.json


class WindowTools(QObject):
    changed = Signal()  # the configuration or the tools listed changed (GUI thread)
    listed = Signal()  # a listing of every source has finished (GUI thread; tests wait on it)
    _remembered = Signal(str)  # a server's remembered tools changed (emitted by the thread that listed it)

    def __init__(
        self,
        ctx: AppContext,
        config_dir: Path,
        parent: QWidget,
        row: ComposerRow,
        shown_chat: Callable[[], int | None],
        secrets: SecretStore | None = None,
    ) -> None:
        """`parent`: the widget the Settings page (and its dialogs) stay over; `row`: where the Tools button
        goes; `shown_chat`: the conversation the window shows (None: a new chat)."""
        super().__init__(parent)
        self.ctx = ctx
        self.dialog_parent = parent
        self.config_file = ToolsConfigFile(config_dir / TOOLS_FILE)
        self.config: ToolsConfig = self.config_file.load()
        self.secrets = secrets or SecretStore()
        self.manager = McpManager(self.secrets)
        self.registry = ToolRegistry([])
        self.cache = ToolsCache(ctx.data_dir / CACHE_FILE, on_change=self._remembered_changed)
        self._remembered.connect(self._on_remembered)
        self._demand = False  # the user looked at tools: servers with no tools remembered are started
        self._configuring = 0  # configurations the MCP client has not taken yet
        self._starting: set[str] = set()  # servers the listing under way starts
        self.failures: list[str] = []  # one sentence per source the last listing could not list
        self.listing = False  # a listing is under way
        self._listed: set[str] = set()  # sources the last listing listed
        self.tasks = TaskRunner(self, workers=4)  # starting and listing servers (may hang: their own workers)
        self._writer = TaskRunner(self, workers=1)  # tools.json and the keychain: in order, never held up
        self._configurer = TaskRunner(self, workers=1)  # the MCP client takes the servers, in order
        self._closed = False
        self.dialog: ToolsDialog | None = None
        self.choices = ChatToolChoices(ctx, self, row, shown_chat, self)  # the Tools button, each chat's tools
        self.changed.connect(self.choices.on_tools_changed)
        self.button = self.choices.button
        self.button.popup_shown.connect(self.on_demand)
        self.button.settings_requested.connect(self.open_dialog)
        self._reconfigure()

    def take_problems(self) -> list[str]:
        """What was wrong with tools.json at start (it was set aside), once."""
        problem, self.config_file.problem = self.config_file.problem, None
        return [problem] if problem else []

    # ----- what the window and the dialog read (memory only)
    def server_state(self, name: str) -> tuple[str, str | None]:
        """("off" | "stopped" | "starting" | "running" | "failed", the last error sentence or None)."""
        config = self.config.server(name)
        if config is None or not config.enabled:
            return "off", None
        server = self.manager.server(name)
        if server is None:
            return ("starting" if self._configuring and self._demand else "stopped"), None
        state = server.state
        if state == "stopped" and name in self._starting:
            state = "starting"
        return state, server.last_error

    def server_entries(self, name: str) -> list[ToolEntry] | None:
        """The server's tools as last listed (None: not listed)."""
        if name not in self._listed:
            return None
        return [e for e in self.registry.entries() if e.source == name]

    @property
    def listed_sources(self) -> set[str]:
        return self._listed

    def session_for(self, conversation_id: int) -> ChatToolSession | None:
        """The chat's tool session for its next answer (None when it has no tool on): see ChatToolChoices.
        A tool on in the chat that is not offered now may be a server's with no tools remembered: it starts."""
        try:
            chat = self.ctx.store.chat_tools(conversation_id)
        except (KeyError, sqlite3.Error, StoreError):
            chat = ChatTools()
        listed = self.listed_sources
        if any(self.registry.entry(key) is None for key in chat.enabled) or chat.servers - listed:
            self.on_demand()
        return self.choices.session_for(conversation_id)

    def server_log(self, name: str) -> str | None:
        server = self.manager.server(name)
        return None if server is None else server.stderr_text()

    # ----- changing the configuration (from the dialog)
    def open_dialog(self) -> ToolsDialog:
        from ember_chat.app.tools.settings_dialog import ToolsDialog

        if self.dialog is None:
            self.dialog = ToolsDialog(self, self.dialog_parent)
            screen = self.dialog_parent.screen().availableGeometry()
            self.dialog.resize(min(820, screen.width() - 40), min(560, screen.height() - 60))
        self.on_demand()
        show_settings_page(self.dialog_parent, "tools", self.dialog)  # Settings ▸ Tools
        return self.dialog

    def _apply(self, config: ToolsConfig, reconfigure: bool, start: frozenset[str] = frozenset()) -> None:
        """`start`: servers the change is about (added, saved, turned on): started and listed anew."""
        old, self.config = self.config, config
        self._demand = True  # (the user changes tools: servers with no tools remembered start too)
        self._save()
        if reconfigure:
            self._drop_gone(old, config)
            self._reconfigure(start)
        self.changed.emit()

    def _save(self) -> None:
        config, file = self.config, self.config_file

        def work() -> None:
            try:
                file.save(config)
            except OSError as exc:
                raise EmberError(
                    f"Ember could not save the tools settings ({exc.strerror or exc}); they apply until Ember "
                    "closes. Free some space or fix the config folder."
                ) from exc

        self._writer.run(work, lambda _: None, self.ctx.notifier.show_error)

    def save_server(
        self,
        config: McpServerConfig,
        secrets: dict[str, str],
        replaces: str | None,
        on_done: Callable[[], None],
        on_error: Callable[[str], None],
    ) -> None:
        """Add a server, or replace `replaces` with it: its secret header values go to the keychain first
        (a keychain that refuses them: `on_error`, nothing changes)."""
        old = self.config.server(replaces) if replaces else None
        store = self.secrets

        def work() -> None:
            for header, value in secrets.items():
                save_header_secret(config.name, header, value, store)
            if old is not None:
                renamed = old.name != config.name
                for header in old.secret_headers:
                    kept = header in config.secret_headers
                    if kept and renamed and header not in secrets:  # the secret follows the new name
                        value = header_secret(old.name, header, store)
                        if value:
                            save_header_secret(config.name, header, value, store)
                    if renamed or not kept:
                        store.clear(header_secret_key(old.name, header))

        def done(_: None) -> None:
            servers = list(self.config.servers)
            if old is not None and old in servers:
                servers[servers.index(old)] = config
            else:
                servers.append(config)
            never_ask, new_chats = self.config.never_ask, self.config.new_chats
            if old is not None and old.name != config.name:  # the tools' keys follow the new name
                prefix = f"{old.name}/"

                def renamed(keys: frozenset[str]) -> frozenset[str]:
                    return frozenset(f"{config.name}/{k[len(prefix) :]}" if k.startswith(prefix) else k for k in keys)

                never_ask = renamed(never_ask)
                servers_on = {config.name if s == old.name else s for s in new_chats.servers}
                new_chats = ChatTools(renamed(new_chats.enabled), servers=frozenset(servers_on))
            try:
                new = self.config.with_changes(servers=tuple(servers), never_ask=never_ask, new_chats=new_chats)
            except InvalidParameter as exc:
                on_error(str(exc))
                return
            self._apply(new, reconfigure=True, start=frozenset({config.name}))
            if old is None:  # (added: its tools are on in the chat shown and in new chats)
                self.choices.servers_added(frozenset({config.name}))
            on_done()

        self._writer.run(work, done, on_error)

    def add_servers(
        self, servers: list[McpServerConfig], on_done: Callable[[], None], on_error: Callable[[str], None]
    ) -> None:
        """Servers pasted as JSON; their credential headers are moved to the keychain first."""
        store = self.secrets

        def work() -> list[McpServerConfig]:
            return [move_headers_to_keychain(s, store) for s in servers]

        def done(moved: list[McpServerConfig]) -> None:
            try:
                new = self.config.with_changes(servers=(*self.config.servers, *moved))
            except InvalidParameter as exc:
                on_error(str(exc))
                return
            self._apply(new, reconfigure=True, start=frozenset(s.name for s in moved))
            self.choices.servers_added(frozenset(s.name for s in moved))
            on_done()

        self._writer.run(work, done, on_error)

    def remove_server(self, name: str) -> None:
        old = self.config.server(name)
        if old is None:
            return
        prefix = f"{name}/"
        new_chats = self.config.new_chats
        self._apply(
            self.config.with_changes(
                servers=tuple(s for s in self.config.servers if s.name != name),
                never_ask=frozenset(k for k in self.config.never_ask if not k.startswith(prefix)),
                new_chats=ChatTools(
                    frozenset(k for k in new_chats.enabled if not k.startswith(prefix)),
                    servers=new_chats.servers - {name},
                ),
            ),
            reconfigure=True,
        )
        store = self.secrets
        self._writer.run(lambda: clear_header_secrets(old, store), lambda _: None, self.ctx.notifier.show_error)

    def set_server_enabled(self, name: str, on: bool) -> None:
        servers = tuple(s.with_changes(enabled=on) if s.name == name else s for s in self.config.servers)
        self._apply(self.config.with_changes(servers=servers), reconfigure=True, start=frozenset({name} if on else ()))

    def remember_new_chats(self, new: ChatTools) -> None:
        """What new chats start with (the user's last choices in the Tools popup), saved in tools.json.
        Nothing else changes: the popup is not filled again under the user's click."""
        if new != self.config.new_chats:
            self.config = self.config.with_changes(new_chats=new)
            self._save()

    def set_never_ask(self, key: str, on: bool) -> None:
        never_ask = self.config.never_ask | {key} if on else self.config.never_ask - {key}
        self._apply(self.config.with_changes(never_ask=frozenset(never_ask)), reconfigure=False)

    def set_builtin(self, builtin: BuiltinToolsConfig) -> None:
        self._apply(self.config.with_changes(builtin=builtin), reconfigure=True)

    def set_max_calls(self, n: int) -> None:
        self._apply(self.config.with_changes(max_calls=n), reconfigure=False)

    def relist(self) -> None:
        """Start (what is not running) and list every source again, remembered tools or not."""
        self._demand = True
        self._reconfigure(frozenset(s.name for s in self.config.servers))

    def on_demand(self) -> None:
        """The user looks at the tools (the Tools popup, Settings ▸ Tools) or a chat with tools on answers:
        the servers with no tools remembered (and not failed) are started and listed."""
        self._demand = True
        if self._closed or self._configuring:
            return  # (the listing that follows the configuration starts them)
        if listing_plan(self.manager.servers(), self.cache, frozenset(), demand=True)[2]:
            self._list(self.config)
            QTimer.singleShot(0, self, self.changed.emit)  # (not from inside the popup that is opening)

    def _drop_gone(self, old: ToolsConfig, new: ToolsConfig) -> None:
        """The tools of servers removed, turned off or changed (and the built-in ones when they changed)
        leave the registry now, before the listing that follows (no chat is offered a stopped tool)."""
        wanted = {s.name: s for s in new.servers if s.enabled}

        def kept(provider: ToolProvider) -> bool:
            if provider.source == BUILTIN_SOURCE:
                return old.builtin == new.builtin
            return getattr(provider, "config", None) == wanted.get(provider.source)

        providers = self.registry.providers
        if not all(kept(p) for p in providers):
            self.registry.set_providers([p for p in providers if kept(p)])
            self._listed = {
                s for s in self._listed if s in wanted or (s == BUILTIN_SOURCE and old.builtin == new.builtin)
            }

    # ----- starting and listing (off the GUI thread)
    def _reconfigure(self, start: frozenset[str] = frozenset()) -> None:
        """The MCP client takes the servers as configured now (in order with the saves), then every source
        is listed (`start`: these servers started and listed anew, remembered tools or not)."""
        config, manager = self.config, self.manager
        self.listing = True
        self._configuring += 1

        def work() -> None:
            if not self._closed:
                manager.configure(config.servers)

        def done(_: None) -> None:
            self._configuring -= 1
            self._list(config, start)

        def failed(message: str) -> None:
            self._configuring -= 1
            self._list_failed(message)

        self._configurer.run(work, done, failed)
        self.changed.emit()

    def _list(self, config: ToolsConfig, start: frozenset[str] = frozenset()) -> None:
        """List every source: the built-in tools, the servers' remembered tools (no process starts) and the
        servers that start now (tools_cache.listing_plan). A server still starting (npx fetching a package,
        or one that hangs) must not hold back the others: what needs no start is listed first, then all."""
        if (config.servers, config.builtin) != (self.config.servers, self.config.builtin) or self._closed:
            return  # a later change lists again (one that lists nothing new, new chats' tools, does not)
        builtin = BuiltinTools.from_config(config.builtin)
        timeout = max([s.start_timeout_s for s in config.servers if s.enabled], default=20.0)
        quick, servers, starting = listing_plan(self.manager.servers(), self.cache, start, self._demand)
        providers: list[ToolProvider] = [builtin, *servers]
        early: list[ToolProvider] = [builtin, *quick]
        self._starting = starting
        if starting:
            self.listing = True
            self.tasks.run(lambda: _listing(early, 5.0), self._on_listed_early, key="list-early")
        self.tasks.run(lambda: _listing(providers, timeout), self._on_listed, self._list_failed, key="list")

    def _remembered_changed(self, name: str) -> None:
        """(The thread that listed a server, or called it:) its remembered tools changed."""
        if not self._closed:
            with contextlib.suppress(RuntimeError):  # (the window is gone)
                self._remembered.emit(name)

    def _on_remembered(self, name: str) -> None:
        """A server's fresh list replaced its remembered tools (a call started it): the registry offers
        the fresh ones. (A listing that is starting it offers them when it ends.)"""
        if name not in self._starting and not self._configuring:
            self._list(self.config)

    def _on_listed_early(self, result: tuple[ToolRegistry, list[str], set[str]]) -> None:
        if self.listing:  # (the whole listing has not come first)
            self.registry, _failures, listed = result
            self._listed |= listed
            self.changed.emit()

    def _on_listed(self, result: tuple[ToolRegistry, list[str], set[str]]) -> None:
        self.registry, self.failures, self._listed = result
        self.listing = False
        self._starting = set()
        self.changed.emit()
        self.listed.emit()

    def _list_failed(self, message: str) -> None:
        self.listing = False
        self._starting = set()
        self.failures = [message]
        self.changed.emit()
        self.listed.emit()

    # ----- the end
    def close(self) -> None:
        """At quit: nothing new starts, listings are dropped, every MCP server is stopped (its process
        group killed). A change saved a moment ago is still written (a short wait for the writer)."""
        self._closed = True
        self.tasks.shutdown()
        self._configurer.shutdown()
        if self.dialog is not None:
            self.dialog.close()
        self._writer.join(SAVE_WAIT_S)
        self.manager.close()

    def join(self, timeout: float | None = None) -> bool:
        """Every thread this started has ended (tests, after close)."""
        return all([r.join(timeout) for r in (self.tasks, self._writer, self._configurer)])


def _listing(providers: list[ToolProvider], timeout_s: float) -> tuple[ToolRegistry, list[str], set[str]]:
    """A registry of these sources, listed (blocking: a worker thread), what failed, and which listed."""
    registry = ToolRegistry(providers)
    failures = registry.refresh(timeout_s)
    listed = {
        p.source for p in providers if getattr(p, "state", "running") == "running" or getattr(p, "from_cache", False)
    }
    return registry, failures, listed
