"""Settings ▸ Local API server: turns Ember's OpenAI-compatible server on and off, shows what it is
doing in the status bar ("API: 1 running, 2 queued") and keeps a log of recent requests: every
HTTP request the server answered (health checks, model lists, refusals), the generations with their
metrics. The server itself is `engine.serve.server.ApiServer`, a client of the same engine service
as the chat. Quitting while it serves asks first (`ask_before_quit`): other programs may rely on it.
The dialog is in api_dialog.py.

The server's key lives in the OS keychain, read and written off the GUI thread (a keychain can take
seconds, or wait for the user to unlock it). Whether the user set a key is also kept, not secret, in
the settings (`api_key_set`): a keychain that cannot be read stops the server only when there is a
key it would have to enforce; with none set, the server starts as it would anyway (loopback only).

Stopping the server never waits on the GUI thread: its connections may be in the middle of an answer
or of reading a request's file, and the serving loop itself takes up to half a second to notice. The
stop runs on a thread of its own; a start that follows waits for it off the GUI thread (the port is
free again then).

The server also serves the other installed models, each loaded when a request names it (a `ModelPool`
built in api_pool.py, one per start, closed with the server); the window's model is pinned in it as it
changes, so its requests use the window's engine and API traffic never unloads it. What the pool loads
and unloads is said in the log (its sentences, handed from its threads to the GUI thread through a
mailbox) and listed in the dialog, where a model can be unloaded."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtWidgets import QLabel, QMessageBox, QStatusBar, QWidget

from ember_chat.app.context import AppContext
from ember_chat.app.engine_link.gui_mailbox import GuiMailbox
from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.app.qt.plain_text import plain_message
from ember_chat.app.qt.settings_page import show_settings_page
from ember_chat.app.server.api_pool import PoolEvent, window_budget, window_catalog, window_pool
from ember_chat.app.server.unknown_fields import WINDOW_UNKNOWN_FIELDS_ADVICE
from ember_chat.engine.attachments import Limits
from ember_chat.engine.errors import EmberError, SecretStoreError
from ember_chat.engine.inference.pool.memory import MemoryBudget
from ember_chat.engine.inference.pool.pool import ModelPool, ModelState
from ember_chat.engine.inference.service.engine import QueueState, RequestRecord
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.projects_option import ServedProjects
from ember_chat.engine.serve.request_log import HttpExchange
from ember_chat.engine.serve.server import ApiServer
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.presets import Preset
from ember_chat.engine.storage.secrets import API_SERVER_KEY, SecretStore

if TYPE_CHECKING:
    from ember_chat.app.server.api_dialog import ApiServerDialog

LOG_LENGTH = 100  # requests kept for the dialog's log


def arrived(entry: RequestRecord | HttpExchange | PoolEvent) -> float:
    """When a log entry's request arrived (a pool event: when it happened), time.time()."""
    return entry.t_submitted if isinstance(entry, RequestRecord) else entry.t


SHUTDOWN_WAIT_S = 10.0  # at quit: a stop that takes longer (a connection stuck in a write) is left to the process exit


def read_server_key(secrets: SecretStore, key_set: bool) -> tuple[str | None, bool]:
    """(the API server's key, whether the keychain could be read), off the GUI thread. A keychain that
    cannot be read raises only when the settings say a key was set: without one the server has no
    key to enforce anyway."""
    try:
        return secrets.read(API_SERVER_KEY, "The API server's key"), True
    except SecretStoreError:
        if key_set:
            raise
        return None, False


class ApiServerControl(QObject):
    """Built from the context (the engine service through the bridge, the settings, the notifier), the
    status bar it shows the server's state in, the widget its dialog and quit question stay over
    (`parent`), and `preset`: the served model's default preset (the presets' for_api, given by the
    composition; asked on the server's threads)."""

    applied = Signal(bool)  # an apply() has finished: the server runs as the settings say (GUI thread)
    exchanged = Signal(object)  # HttpExchange: the server answered a request (emitted on its thread, queued)
    pool_changed = Signal()  # the models loaded for API requests changed (GUI thread)
    _pool_wake = Signal()  # from the pool's threads: its mailbox has a sentence
    _pool_done = Signal(object)  # RequestRecord: a pool engine answered a request (emitted on its thread, queued)

    def __init__(
        self,
        ctx: AppContext,
        status_bar: QStatusBar,
        parent: QWidget | None = None,
        preset: Callable[[], Preset | None] | None = None,
    ) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.preset = preset
        self.server: ApiServer | None = None
        self.secrets = SecretStore()
        self.tasks = TaskRunner(self, workers=1)
        self.records: list[RequestRecord | HttpExchange | PoolEvent] = []  # the log, oldest first
        self.pool: ModelPool | None = None  # the other installed models, loaded for requests (while serving)
        self.pool_tasks = TaskRunner(self, workers=1)  # the pool's table read, its unloads, the window's pins
        self._pool_mail: GuiMailbox[PoolEvent] = GuiMailbox(self._pool_wake.emit)
        self._pool_readers: list[Callable[[list[ModelState]], None]] = []  # views waiting for read_pool's rows
        self._pool_wake.connect(self._pool_said)
        ctx.bridge.loaded.connect(self._pin_window_model)
        ctx.bridge.unloaded.connect(self._pin_window_model)
        self.quit_question: QMessageBox | None = None  # asked on quitting while the server runs
        self._quit_confirmed = False
        self.exchanged.connect(self._on_exchange)
        self.status = QLabel()
        self.status.setAccessibleName(self.tr("API server status"))
        self.status.hide()
        status_bar.addPermanentWidget(self.status)
        ctx.bridge.queue_changed.connect(self._on_queue)
        ctx.bridge.request_done.connect(self._on_done)
        self._pool_done.connect(self._on_done)  # (the models loaded for requests: their engines' records)
        self.dialog: ApiServerDialog | None = None
        self._stopping: list[threading.Thread] = []  # servers being stopped (see the module)

    @property
    def running(self) -> bool:
        return self.server is not None

    def apply(self) -> None:
        """Start or stop the server as the settings say. The key is read off the GUI thread, after the
        server running until now has stopped; `applied` says how it ended (False, and a banner, when the
        server could not start). A later apply made meanwhile wins."""
        self.stop()
        stopping = list(self._stopping)

        def stopped() -> None:  # (on the worker: the port the old server held is free once it has stopped)
            for thread in stopping:
                thread.join()

        if not self.ctx.settings.api_server:
            self.tasks.run(stopped, lambda _none: self.applied.emit(True), key="apply")
            return
        secrets, key_set, settings = self.secrets, self.ctx.settings.api_key_set, self.ctx.settings

        def when_stopped_read_key() -> tuple[str | None, bool, MemoryBudget]:
            stopped()
            # (the free memory is asked here: nvidia-smi may take seconds)
            return (*read_server_key(secrets, key_set), window_budget(settings))

        self.tasks.run(when_stopped_read_key, self._start, self._keychain_failed, key="apply")

    def _keychain_failed(self, error: str) -> None:
        # a keychain that cannot be read must not start the server without the key the user set
        self.ctx.notifier.show_error(
            self.tr(
                "Local API server: {error} The server was not started, because it must not run without its "
                "key. Unlock the system keychain, then apply the settings again."
            ).format(error=error)
        )
        self.applied.emit(False)

    def _start(self, found: tuple[str | None, bool, MemoryBudget]) -> None:
        api_key, readable, budget = found
        self.stop()
        s = self.ctx.settings
        if readable and s.api_key_set != (api_key is not None):
            # the keychain says what the flag should (a key set before the flag existed, or removed
            # by hand): the flag follows, so an unreadable keychain later is judged right
            s = s.with_changes(api_key_set=api_key is not None)
            self.ctx.save_settings(s)
        if not s.api_server:  # turned off meanwhile
            self.applied.emit(True)
            return
        config = ServerConfig(
            host=s.api_host,
            port=s.api_port,
            api_key=api_key,
            allowed_origins=tuple(o.strip() for o in s.api_allowed_origins.split(",") if o.strip()),
            attachment_limits=Limits.from_settings(s),  # a request's files: as the window's own
            allow_unknown_fields=s.api_allow_unknown_fields,
            unknown_fields_advice=WINDOW_UNKNOWN_FIELDS_ADVICE,  # (this server has no --allow-unknown-fields)
        )
        service = self.ctx.bridge.service
        service.queue_limit = s.api_queue_limit
        ctx, mail = self.ctx, self._pool_mail
        catalog = window_catalog(lambda: ctx.library, ctx.model_settings, lambda: ctx.settings)
        pool = window_pool(
            service, catalog, s, budget, lambda said: mail.post(PoolEvent(time.time(), said)), self._pool_done.emit
        )
        # (a request's `"ember": {"project": NAME}`: the window's projects, on its chat store)
        projects = ServedProjects(AppPaths(ctx.data_dir, ctx.settings_file.path.parent), ctx.store)
        server = ApiServer(
            service, config, on_request=self.exchanged.emit, preset=self.preset, pool=pool, projects=projects
        )
        try:
            server.start()
        except EmberError as exc:
            pool.close()  # (nothing loaded yet: it only joins its TTL thread)
            self.ctx.notifier.show_error(self.tr("Local API server: {error}").format(error=exc))
            self.applied.emit(False)
            return
        self.server, self.pool = server, pool
        self._pin_window_model()
        self.pool_changed.emit()
        self._show(service.queue_state())
        self.applied.emit(True)

    def stop(self) -> None:
        """The server stops taking requests and ends its connections, on a thread of its own (never
        waited for here). Not a daemon: quitting Ember waits for it, so no connection is left open."""
        server, self.server = self.server, None
        pool, self.pool = self.pool, None
        self._pool_readers = []  # (a read still out is of this pool: dropped when it comes back)
        if server is not None:

            def stop() -> None:
                server.stop()
                if pool is not None:  # after the server: no request leases a model any more
                    pool.close()

            thread = threading.Thread(target=stop, name="ember-api-stop")
            self._stopping = [t for t in self._stopping if t.is_alive()] + [thread]
            thread.start()
        self.status.hide()
        if pool is not None:
            self.pool_changed.emit()

    def join(self, timeout: float | None = None) -> bool:
        """Wait until the keychain reads and every stop have ended (tests, teardown); False if some
        still run after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in list(self._stopping):
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        pool_left = None if deadline is None else max(0.0, deadline - time.monotonic())
        return (
            self.tasks.join(left) and self.pool_tasks.join(pool_left) and not any(t.is_alive() for t in self._stopping)
        )

    def shutdown(self) -> None:
        """The window closes: the server stops, a keychain read still out is dropped. A connection still
        being answered no longer tells this window (about to be destroyed) of its request, and the stop is
        waited for (the window is hidden by now) so none outlives the engine closed next."""
        self.tasks.shutdown()
        self.pool_tasks.shutdown()
        self._pool_mail.close()  # (what the pool says while it closes is for no one)
        if self.server is not None:
            self.server.stop_telling()
        self.stop()
        for thread in self._stopping:
            thread.join(SHUTDOWN_WAIT_S)

    def _show(self, state: QueueState) -> None:
        if self.server is None:
            self.status.hide()
            return
        running, queued = state.count("api")
        self.status.setText(
            self.tr("API {url}: {running} running, {queued} queued").format(
                url=self.server.url, running=running, queued=queued
            )
        )
        self.status.show()

    @Slot(object)
    def _on_queue(self, state: QueueState) -> None:
        self._show(state)

    @Slot(object)
    def _on_done(self, record: RequestRecord) -> None:
        if record.client == "api":
            self._log(record)

    @Slot(object)
    def _on_exchange(self, exchange: HttpExchange) -> None:
        if not exchange.generation:  # a generation is logged by the engine service, with its metrics
            self._log(exchange)

    # ----- the models loaded for API requests
    @Slot()
    def _pin_window_model(self, *_model: object) -> None:
        """The window's model changed (loaded, unloaded): the pool serves it with the window's engine and
        never unloads it. Off the GUI thread (the pool reads the library and the model's header), in order."""
        pool, service = self.pool, self.ctx.bridge.service
        if pool is None:
            return
        name = service.model_alias if service.model is not None else None
        self.pool_tasks.run(lambda: pool.pin(name, service, "window"), lambda _none: None)

    def read_pool(self, shown: Callable[[list[ModelState]], None]) -> None:
        """`shown(rows)` on the GUI thread: the models the pool loaded for requests (read off it: the
        pool lists the library); none while the server is off. Several views read it (the dialog, the
        Model Manager, the model bar): one read answers every view that asked while it ran (a newer
        read supersedes one still out, and would drop the first asker's answer)."""
        pool = self.pool
        if pool is None:
            shown([])
            return
        self._pool_readers.append(shown)

        def rows() -> list[ModelState]:
            return [r for r in pool.states() if r.loaded_by == "api" and r.state in ("loaded", "loading")]

        self.pool_tasks.run(rows, lambda rows: self._pool_read(pool, rows), key="read-pool")

    def _pool_read(self, pool: ModelPool, rows: list[ModelState]) -> None:
        if pool is not self.pool:  # read from a server since stopped: its views were answered [] then
            return
        readers, self._pool_readers = self._pool_readers, []
        for shown in readers:
            shown(rows)

    def unload_api_model(self, name: str, refused: Callable[[str], None]) -> None:
        """Unload a model the pool loaded, off the GUI thread (it joins the model's engine);
        `refused(message)`: the pool's reason it did not (a model answering requests, or still loading)."""
        pool = self.pool
        if pool is None:
            return
        self.pool_tasks.run(lambda: pool.unload(name, "Unload in Ember's window"), lambda _none: None, refused)

    @Slot()
    def _pool_said(self) -> None:
        out = self._pool_mail.collect()
        while out:
            self._log(out.popleft())
        self.pool_changed.emit()

    def _log(self, entry: RequestRecord | HttpExchange | PoolEvent) -> None:
        """Into the log in the order the requests arrived: each is told once answered, from its own
        connection's thread, so a request answered just before the next one arrived may be told after it."""
        row = len(self.records)
        while row and arrived(self.records[row - 1]) > arrived(entry):
            row -= 1
        self.records.insert(row, entry)
        dropped = max(0, len(self.records) - LOG_LENGTH)
        del self.records[:dropped]
        if self.dialog is not None:
            self.dialog.add_record(entry, row, dropped)

    def ask_before_quit(self, quit_: Callable[[], None]) -> bool:
        """The window is closing: while the server runs, ask first and say True (the close waits);
        "Quit" then calls `quit_` again, which goes through."""
        if self.server is None or self._quit_confirmed:
            return False
        if self.quit_question is None:
            parent = self.parent()
            box = plain_message(QMessageBox(parent if isinstance(parent, QWidget) else None))
            box.setIcon(QMessageBox.Icon.Warning)
            box.setWindowTitle(self.tr("Quit Ember"))
            box.setText(self.tr("The local API server is running at {url}.").format(url=self.server.url))
            box.setInformativeText(
                self.tr(
                    "Quitting stops it: programs using it will lose their connection, and answers in progress stop."
                )
            )
            self.quit_button = box.addButton(self.tr("Quit and stop the server"), QMessageBox.ButtonRole.AcceptRole)
            box.addButton(QMessageBox.StandardButton.Cancel)
            box.setDefaultButton(QMessageBox.StandardButton.Cancel)
            box.buttonClicked.connect(lambda button: self._quit_answered(button, quit_))
            self.quit_question = box
        self.quit_question.open()
        return True

    def _quit_answered(self, button: object, quit_: Callable[[], None]) -> None:
        self.quit_question = None
        if button is self.quit_button:
            self._quit_confirmed = True
            quit_()

    def open_dialog(self) -> ApiServerDialog:
        from ember_chat.app.server.api_dialog import ApiServerDialog  # (loaded when first opened)

        parent = self.parent()
        window = parent if isinstance(parent, QWidget) else None
        if self.dialog is None:
            self.dialog = ApiServerDialog(self, window)
        show_settings_page(window, "api", self.dialog)  # Settings ▸ Local API server
        return self.dialog
