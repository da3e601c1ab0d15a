"""Compare models from the transcript: the "Compare…" action on a message opens the comparison
dialog for its prompt (the user message, or the one an answer answers), runs the chosen models as a
task of the window's task runner (engine/inference/compare.py; its events come back to the GUI thread
through the runner, in order), stores the comparison with the chat as it goes, and
"Keep this one" adds the answer to the chat as a new branch (a sibling of the prompt's answers, with
its metrics) and switches to it.

The window's own local model is unloaded while local models are compared (one model in memory at a
time) and loaded again afterwards (unless the user loaded another one meanwhile), through the window's
model actions, so the picker, the status and the last-model setting follow as for any load.

Built from the app's context and the exact collaborators it reads or asks (the chat shown, the window's
model, the parameters panel, the picker's choices, the colours), never the window: the shell wires it
(shell/compose.py)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import NamedTuple, Protocol

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QWidget

from ember_chat.app.compare.dialog import CompareDialog
from ember_chat.app.context import AppContext
from ember_chat.app.engine_link.tasks import Task
from ember_chat.app.side_panel.params_panel import ParamsPanel
from ember_chat.app.style.theme import Colors
from ember_chat.engine.attachments import AttachmentStore
from ember_chat.engine.conversation.messages import thread_messages
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.errors import EmberError
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.inference.compare import (
    CompareAnswer,
    CompareListener,
    CompareTarget,
    fixed_seed,
    run_comparison,
)
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.inference.service.resolver import model_ref
from ember_chat.engine.storage.comparisons import Comparison
from ember_chat.engine.storage.connections import parse_remote_model_name

WATCH_MS = 100  # how often a run's prompt is looked for while it runs (a stalled stream says nothing)


class CompareEvent(NamedTuple):
    """What a run says of one column: "loading" (a fraction), "started", "tokens" (text), "finished"
    (a CompareAnswer)."""

    kind: str
    index: int
    value: object


class _Reported(CompareListener):
    """A run's events, reported by its threads to the task runner, which hands them to the GUI thread
    in order (no QObject is touched on those threads)."""

    def __init__(self, report: Callable[[CompareEvent], None]) -> None:
        self.report = report

    def loading(self, index: int, fraction: float) -> None:
        self.report(CompareEvent("loading", index, fraction))

    def started(self, index: int) -> None:
        self.report(CompareEvent("started", index, None))

    def tokens(self, index: int, text: str, output_tokens: int) -> None:
        self.report(CompareEvent("tokens", index, text))

    def finished(self, index: int, answer: CompareAnswer) -> None:
        self.report(CompareEvent("finished", index, answer))


class ChatAttachmentStore(Protocol):
    @property
    def store(self) -> AttachmentStore: ...


class ShownChat(Protocol):
    """The chat the window shows (the conversation's controller), as much as a comparison needs of it:
    its answer stopped before the dialog opens, its thread sent as the chat sends it, shown again
    after an answer is kept."""

    @property
    def conversation_id(self) -> int | None: ...

    @property
    def attachments(self) -> ChatAttachmentStore | None: ...

    def after_stop(self, action: Callable[[], None]) -> None: ...

    def refresh(self, jump_to: int | None = None) -> None: ...


class WindowModel(Protocol):
    """The window's own model (the shell's model actions): local models make room for it, and it is
    loaded back afterwards."""

    @property
    def loaded_name(self) -> str | None: ...

    @property
    def loading(self) -> bool: ...

    def unload_model(self) -> None: ...

    def load_model(self, name: str) -> None: ...


class CompareActions(QObject):
    dialog_opened = Signal(object)  # the CompareDialog (tests)
    run_ended = Signal(object)  # the stored Comparison
    run_lost = Signal(str)  # why a run stopped with its prompt gone (deleted, trashed, restored over)
    kept = Signal(int)  # the new message's id

    def __init__(
        self,
        ctx: AppContext,
        *,
        chat: ShownChat,
        models: WindowModel,
        model: Callable[[], ModelDescription | None],
        params: ParamsPanel,
        choices: Callable[[], list[tuple[str, str]]],
        colors: Callable[[], Colors],
        dialog_parent: QWidget,
    ) -> None:
        """`model`: the model the window has loaded now (None while none is); `choices`: (label, name) of
        every model the picker offers; `colors`: the theme's colours now; `dialog_parent`: what the
        dialog opens over. The shell connects the transcript's actions to `on_action`."""
        super().__init__(dialog_parent)
        self.ctx = ctx
        self.chat = chat
        self.models = models
        self._model = model
        self.params = params
        self._choices = choices
        self._colors = colors
        self._dialog_parent = dialog_parent
        self.dialog: CompareDialog | None = None
        self.conversation_id: int | None = None
        self.prompt_id: int | None = None
        self._task: Task | None = None  # the run, in the window's task runner
        self._cancel = threading.Event()
        self._running: Comparison | None = None
        self._reload: str | None = None  # the window's model, to load again after the run
        self._closed = False  # the window is closing
        # the store says nothing when a message goes: the run's prompt is looked for while it runs
        self._watch = QTimer(self)
        self._watch.setInterval(WATCH_MS)
        self._watch.timeout.connect(self._look_for_prompt)

    # ----- opening
    def on_action(self, verb: str, message_id: int, _arg: int) -> None:
        if verb == "compare":
            self.chat.after_stop(lambda: self.open(message_id))

    def open(self, message_id: int) -> CompareDialog:
        """The comparison dialog for the prompt of `message_id` (a user message, or an answer's question)."""
        store = self.ctx.store
        message = store.message(message_id)
        prompt = message if message.role == "user" or message.parent_id is None else store.message(message.parent_id)
        if self.dialog is not None:
            if self.dialog.comparison is not None and self.running:
                self.dialog.raise_()
                return self.dialog
            self.dialog.close()
        self.conversation_id, self.prompt_id = prompt.conversation_id, prompt.id
        choices = self._choices()
        loaded = self.models.loaded_name if self._model() is not None else None
        choices = sorted(choices, key=lambda c: c[1] != loaded)  # the window's model first: the diff's base
        names = [n for _label, n in choices]
        preselect = ([loaded] if loaded in names else []) + [n for n in names if n != loaded][:1]
        dialog = CompareDialog(
            self._dialog_parent,
            self._colors(),
            prompt.content,
            choices,
            preselect,
            store.comparisons.of_prompt(prompt.id),
            self._colors,
        )
        dialog.start_requested.connect(self.start)
        dialog.keep_requested.connect(self.keep)
        dialog.stop_requested.connect(self.stop)
        dialog.finished.connect(self.stop)  # closing the dialog stops the run
        self.dialog = dialog
        dialog.show()
        self.dialog_opened.emit(dialog)
        return dialog

    @property
    def running(self) -> bool:
        """A run is out (not yet ended; a run the window's close dropped is not)."""
        return self._task is not None and not self._task.stale

    # ----- a run
    def start(self, names: list[str]) -> None:
        if self.dialog is None or self.conversation_id is None or self.prompt_id is None or self.running:
            return  # (nothing to run on: the chats changed under the dialog, see `forget`)
        store, side = self.ctx.store, self.params
        params = fixed_seed(side.params())
        system_prompt = side.system_prompt.toPlainText()
        thread = store.thread(self.conversation_id, self.prompt_id)
        attachments = self.chat.attachments  # the thread as the chat sends it (files, tool calls)
        try:
            history = thread_messages(thread, attachments.store if attachments else None, system_prompt)
        except EmberError as exc:  # an attached image whose file is gone
            self.ctx.notifier.show_error(str(exc))
            return
        settings = {"seed": params.seed, "params": params.to_dict(), "system_prompt": system_prompt}
        try:
            comparison = store.comparisons.create(self.conversation_id, self.prompt_id, names, settings)
        except EmberError as exc:
            self.ctx.notifier.show_error(str(exc))
            return
        self._running = comparison
        cancel = self._cancel = threading.Event()
        self.dialog.run_started(comparison)
        # the window's local model makes room for the local ones, and comes back afterwards
        any_local = any(parse_remote_model_name(n) is None for n in names)
        window_model = self._model()
        window_local = any_local and window_model is not None and not window_model.is_remote
        self._reload = self.models.loaded_name if window_local else None
        library, connections, model_settings = self.ctx.library, self.ctx.connections, self.ctx.model_settings
        defaults = self.ctx.settings.with_changes(context_length=side.context.value())
        service = self.ctx.bridge.service

        def work(report: Callable[[CompareEvent], None]) -> None:
            events = _Reported(report)
            targets: list[CompareTarget | None] = []
            for i, name in enumerate(names):
                try:
                    ref, _alias = model_ref(name, library, connections, model_settings, defaults, service.server_id)
                    targets.append(CompareTarget(name, ref))
                except EmberError as exc:
                    targets.append(None)
                    events.finished(i, CompareAnswer("", "error", None, str(exc)))
            runnable = [(i, t) for i, t in enumerate(targets) if t is not None]
            if len(runnable) >= 1 and not cancel.is_set():
                self._run(service, runnable, history, params, events, cancel)

        if self._reload is not None:
            self.models.unload_model()
        # a run lasts as long as its streams: a thread of its own, not one of the runner's workers
        self._task = self.ctx.tasks.run_reporting(
            work, self._on_event, self._on_done, self._on_failed, cancel=cancel.set, own_thread=True
        )
        self._watch.start()

    @staticmethod
    def _run(
        service: EngineService,
        runnable: list[tuple[int, CompareTarget]],
        history: list[ChatMessage],
        params: SamplingParams,
        events: CompareListener,
        cancel: threading.Event,
    ) -> None:
        """Run what could be resolved; the engine's indexes are mapped back to the dialog's columns."""

        class Mapped(CompareListener):
            def loading(self, index: int, fraction: float) -> None:
                events.loading(runnable[index][0], fraction)

            def started(self, index: int) -> None:
                events.started(runnable[index][0])

            def tokens(self, index: int, text: str, output_tokens: int) -> None:
                events.tokens(runnable[index][0], text, output_tokens)

            def finished(self, index: int, answer: CompareAnswer) -> None:
                events.finished(runnable[index][0], answer)

        targets = [t for _i, t in runnable]  # (those that could be resolved: one is enough to run)
        run_comparison(service, targets, history, params, Mapped(), cancel)

    def _look_for_prompt(self) -> None:
        """GUI thread, while a run is out: a run whose prompt went (deleted, its chat in the Trash) is
        stopped and stores nothing more."""
        comparison = self._running
        gone = self._prompt_gone(comparison) if comparison is not None else ""
        if gone:
            self.abandon(gone)

    def _on_event(self, event: CompareEvent) -> None:
        """GUI thread: show what the run said; store each answer as it ends."""
        comparison = self._running
        if comparison is None:  # (abandoned: nothing more of it is stored or shown)
            return
        kind, index, value = event
        if kind == "finished" and isinstance(value, CompareAnswer) and index < len(comparison.answers):
            gone = self._prompt_gone(comparison)  # (not written into rows that are no longer its own)
            if gone:
                self.abandon(gone)
                return
            answer = comparison.answers[index]
            try:
                self.ctx.store.comparisons.set_answer(answer.id, value.text, value.metrics_dict(), value.error)
            except (EmberError, sqlite3.DatabaseError):
                self.abandon(self._prompt_gone(comparison) or self._unwritable())
                return
        if self._shows(comparison):
            assert self.dialog is not None
            self.dialog.show_event(kind, index, value)

    def _on_done(self, _result: object) -> None:
        self._task = None
        self._watch.stop()
        self._ended()

    def _on_failed(self, message: str) -> None:
        """The run's task raised (a bug: the engine's errors end up in the columns)."""
        self.ctx.notifier.show_error(message)
        self._on_done(None)

    def _shows(self, comparison: Comparison) -> bool:
        """The dialog shows `comparison`."""
        shown = self.dialog.comparison if self.dialog is not None else None
        return shown is not None and shown.id == comparison.id

    def _where(self, comparison: Comparison) -> str:
        """Whether the comparison's prompt is still there: "" if so, "deleted" (the prompt or its chat),
        "trash" (its chat is in the Trash); "" too when the database refuses to say now."""
        try:
            prompt = self.ctx.store.message(comparison.prompt_id) if comparison.prompt_id is not None else None
            chat = self.ctx.store.conversation(comparison.conversation_id)
        except (EmberError, KeyError):  # (a message or chat that is not there)
            prompt = chat = None
        except sqlite3.DatabaseError:
            return ""  # (the database refuses now: told when an answer cannot be stored)
        if chat is None or (comparison.prompt_id is not None and prompt is None):
            return "deleted"
        return "trash" if chat.deleted_at is not None else ""

    def _prompt_gone(self, comparison: Comparison) -> str:
        """Why the run's prompt is no longer there to answer ("" when it is)."""
        where = self._where(comparison)
        if where == "deleted":
            return self.tr("The comparison stopped: its prompt was deleted from the chat.")
        if where == "trash":
            return self.tr("The comparison stopped: its chat was moved to the Trash.")
        return ""

    def _unwritable(self) -> str:
        return self.tr("The comparison stopped: its answers cannot be saved in the chat database now.")

    def abandon(self, why: str) -> None:
        """Stop the run and store nothing more of it (its prompt is gone, or the database is about to be
        replaced by a backup); the dialog keeps what streamed and says `why`."""
        comparison, self._running = self._running, None
        if comparison is None:
            return
        self._cancel.set()
        if self._shows(comparison):
            assert self.dialog is not None
            self.dialog.run_lost(why)
        self.run_lost.emit(why)

    def forget(self, why: str) -> None:
        """The chats changed under the dialog (another backup restored, all chats deleted): a run stops
        and stores nothing more, and the dialog keeps nothing and starts nothing; it says `why`."""
        self.abandon(why)
        self.conversation_id = self.prompt_id = None
        if self.dialog is not None:
            self.dialog.forget(why)

    def _ended(self) -> None:
        comparison, self._running = self._running, None
        if self._reload is not None:
            name, self._reload = self._reload, None
            picked = self._model() is not None or self.models.loading  # the user loaded another meanwhile
            if not self._closed and not picked:  # (not while the window closes)
                self.models.load_model(name)
        if comparison is None:
            return
        try:
            stored = self.ctx.store.comparisons.get(comparison.id)
        except (EmberError, sqlite3.DatabaseError):
            self._running = comparison
            self.abandon(self._prompt_gone(comparison) or self._unwritable())
            return
        if self._shows(stored):
            assert self.dialog is not None
            self.dialog.run_ended(stored)
        self.run_ended.emit(stored)

    # ----- keeping an answer
    def keep(self, index: int) -> None:
        """The answer of column `index` becomes a new branch under its prompt, and the chat shows it."""
        dialog = self.dialog
        if dialog is None or dialog.comparison is None:
            return
        store = self.ctx.store
        try:
            try:
                comparison: Comparison | None = store.comparisons.get(dialog.comparison.id)
            except EmberError:  # (gone with its prompt or chat)
                comparison = None
            refused = self._refused(dialog.comparison, comparison)
            if refused or comparison is None:
                self.ctx.notifier.show_error(refused)
                return
            answer = comparison.answers[index]
            if not answer.content.strip() or answer.kept_message_id is not None:
                return
            message = store.add_message(
                comparison.conversation_id, "assistant", answer.content, comparison.prompt_id, metrics=answer.metrics
            )
            store.comparisons.keep(answer.id, message.id)
        except (EmberError, sqlite3.DatabaseError):  # the prompt was deleted meanwhile, or the disk refuses
            self.ctx.notifier.show_error(
                self.tr(
                    "This answer could not be added to the chat: its prompt is no longer in the chat, or the "
                    "chat database cannot be written now. Run the comparison again on a message that is there."
                )
            )
            return
        dialog.comparison_changed(store.comparisons.get(comparison.id))
        if self.chat.conversation_id == comparison.conversation_id:
            self.chat.refresh()
        self.kept.emit(message.id)

    def _refused(self, shown: Comparison, stored: Comparison | None) -> str:
        """Why an answer of the comparison `shown` cannot be kept now ("" when it can): `stored` (read by
        its id) is not there or is another one (its chats were deleted or restored over), or its prompt
        is gone."""
        same = stored is not None and (stored.conversation_id, stored.prompt_id, stored.created_at) == (
            shown.conversation_id,
            shown.prompt_id,
            shown.created_at,
        )
        where = self._where(stored) if stored is not None and same else "deleted"
        if where == "deleted":
            return self.tr(
                "This answer could not be added: its prompt is no longer in your chats (it was deleted, or another "
                "backup was restored). Run the comparison again on a message that is there."
            )
        if where == "trash":
            return self.tr(
                "This answer could not be added: its chat is in the Trash. Restore the chat from the Trash, then "
                "keep the answer."
            )
        return ""

    def stop(self, *_: object) -> None:
        """Stop the run (its loads, streams, and models still waiting for their turn)."""
        self._cancel.set()

    # ----- the window's shutdown
    def close(self) -> None:
        """Stop a run (never waiting for it)."""
        self._closed = True
        self._cancel.set()
        self._watch.stop()  # (the runner, shut down first, drops the run's end, which would stop it)
        if self.dialog is not None:
            self.dialog.close()

    def join(self, timeout: float) -> bool:
        """Wait until a run's task has returned (tests, after close)."""
        task = self._task
        return task is None or task.wait(timeout)
