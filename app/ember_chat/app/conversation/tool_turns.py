"""The window's tool loop (a part of the ChatController, `controller.tools`): an answer that ended with
tool calls (Finished reason "tool_calls") is kept with its calls; the chat's ChatToolSession sorts them
(`triage`: invalid ones and those over the cap get their error without running; the others run at once
when the user said never to ask or always to allow, else they wait for consent); each call that waits
shows a consent card in the transcript (tool_cards.py) and runs once the user allows it. Calls run on
worker threads (TaskRunner: never the GUI thread, never the engine's); when every call of the answer
has its result, the next generation starts from `ChatToolSession.continuation(...)` with the same
tools, below the answer, until the model answers without calling or the cap ends the loop (its
sentence is shown). Stop cancels the calls that run and ends the loop; calls not run say so.

Everything is stored as it happens (the calls, each call's state, its result, who decided), so the
cards are shown again when the chat is reopened and a later turn gives the model the same history.

The loop reaches its controller through ToolLoopHost (what it reads and asks of it), so this module and
controller.py do not import each other."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QObject, SignalInstance, Slot

from ember_chat.app.engine_link.bridge import EngineBridge
from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.app.transcript.tool_cards import ALLOW, ALWAYS, DENY, FOLD
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.tools import InvalidCall, ToolCall, ToolRequest, ToolResult
from ember_chat.engine.storage.streaming import describe_write_error

if TYPE_CHECKING:
    from ember_chat.engine.storage.conversations import ConversationStore, Message
    from ember_chat.engine.tools.session import ChatToolSession, PendingCall

NO_TOOLS = "This chat has no tools turned on, so Ember did not run this call."
STOPPED = "The user stopped the answer before this call finished."


@dataclass
class _Round:
    """One answer's calls, from its Finished until every call has its result."""

    answer: Message
    text: str
    history: list[ChatMessage]
    pendings: list[PendingCall]
    cancel: threading.Event = field(default_factory=threading.Event)
    running: set[int] = field(default_factory=set)  # indexes of the calls on a worker
    capped: bool = False  # some calls were over the cap: no next generation


CUT = (
    "Not run: the answer was cut by max tokens before the model ended its turn. Regenerate it with a "
    "larger max tokens (Parameters)."
)
STOPPED_WRITING = "Not run: the answer was stopped before the model ended its turn (this call may be unfinished)."


class ToolLoopHost(Protocol):
    """What the tool loop reads and asks of the conversation it is part of (controller.ChatController
    meets it)."""

    store: ConversationStore
    bridge: EngineBridge
    conversation_id: int | None  # the chat on screen
    request_id: int | None  # the generation under way
    tool_session_for: Callable[[int], ChatToolSession | None] | None  # a chat's tools (given by the composition)

    @property
    def notice(self) -> SignalInstance: ...  # Signal(str): a sentence for the banner
    @property
    def error(self) -> SignalInstance: ...  # Signal(str)
    def refresh(self, jump_to: int | None = None) -> None: ...  # the thread shown again, as stored now
    def continue_after_tools(self, answer: Message, messages: list[ChatMessage]) -> bool: ...
    def tools_done(self) -> None: ...  # the loop is over: the answer ends


class ToolTurns(QObject):
    def __init__(self, controller: ToolLoopHost, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.c = controller
        self.session: ChatToolSession | None = None  # the chat's tools for the answer in progress
        self.tasks = TaskRunner(self, workers=4)  # the calls that run (several may at once)
        self._calls: dict[int, list[ToolCall | InvalidCall]] = {}  # request id -> the calls it made
        self._history: dict[int, list[ChatMessage]] = {}  # request id -> what it was given
        self.round: _Round | None = None
        self._save_failing = False
        controller.bridge.tool_call.connect(self._on_tool_call)

    @property
    def active(self) -> bool:
        """A round of calls waits for consent or runs: the answer is not over."""
        return self.round is not None

    # ----- before a generation
    def prepare(self, conversation_id: int, continuing: bool) -> ToolRequest | None:
        """The tools the next generation may call. A new answer (not a continuation after results)
        takes the chat's session from the window (`controller.tool_session_for`) and starts its call
        budget anew."""
        if not continuing:
            find = self.c.tool_session_for
            self.session = find(conversation_id) if find is not None else None
            if self.session is not None:
                self.session.new_answer()
        elif self.session is not None:  # a tool turned off (or on) in the popup meanwhile counts now
            with contextlib.suppress(sqlite3.Error):  # (unreadable: the choices the loop started with)
                self.session.chat = self.c.store.chat_tools(conversation_id)
        return self.session.request() if self.session is not None else None

    def sent(self, request_id: int, history: list[ChatMessage]) -> None:
        """The generation just submitted (one at a time: what an earlier one left is dropped)."""
        self._history = {request_id: history}
        self._calls = {}

    @Slot(int, int, object)
    def _on_tool_call(self, rid: int, _index: int, call: ToolCall | InvalidCall) -> None:
        if rid == self.c.request_id:
            self._calls.setdefault(rid, []).append(call)

    # ----- after a generation
    def after_answer(self, rid: int, reason: str, answer: Message, text: str) -> bool:
        """An answer ended (and is saved). True when it called tools: its cards are shown and the
        loop goes on (the controller stays busy until `_end`)."""
        calls = self._calls.pop(rid, [])
        history = self._history.pop(rid, [])
        if reason not in ("tool_calls", "length", "cancelled") or not calls:
            return False
        store = self.c.store
        session = self.session
        if not self._save(store.set_tool_calls, answer.id, calls, not_run=True):
            return False
        if reason in ("length", "cancelled"):
            # cut by max tokens or stopped (a call being written comes cut short): its calls are kept and
            # shown, none runs (the turn never ended)
            why, decision = (CUT, "cut") if reason == "length" else (STOPPED_WRITING, "cancelled")
            for call in calls:
                plain = call.call if isinstance(call, InvalidCall) else call
                self._save(
                    store.set_tool_result, answer.id, ToolResult(plain.id, plain.name, why, True), None, decision
                )
            self.c.refresh()
            return False
        if session is None:
            for call in calls:
                plain = call.call if isinstance(call, InvalidCall) else call
                self._save(
                    store.set_tool_result, answer.id, ToolResult(plain.id, plain.name, NO_TOOLS, True), None, "invalid"
                )
            self.c.refresh()
            return False
        self.round = turn = _Round(answer, text, history, session.triage(calls))
        for index, p in enumerate(turn.pendings):
            call = _plain(p)
            source = p.entry.source if p.entry is not None else None
            if p.result is not None:
                why = self._refused_why(p)
                turn.capped |= why == "cap"
                self._save(store.set_tool_result, answer.id, p.result, source, why)
            elif p.needs_consent:
                if not self._save(store.set_tool_state, answer.id, call.id, call.name, "asking", source, not_run=True):
                    self.round = None  # (its card could not be kept: nothing to answer it on)
                    return False
            else:
                always = p.entry is not None and p.entry.key in session.chat.always
                self._run(turn, index, "always" if always else "auto")
        self.c.refresh()
        self._maybe_continue()
        return True

    def _refused_why(self, p: PendingCall) -> str:
        """The decision stored for a call that was not offered to run: over the cap, or invalid."""
        assert self.session is not None and p.result is not None
        if not isinstance(p.call, InvalidCall) and p.result.content == self.session.limit_message():
            return "cap"
        return "invalid"

    # ----- consent (the card's buttons)
    def on_action(self, verb: str, message_id: int, index: int) -> None:
        if verb == FOLD:
            self.c.refresh()
            return
        turn = self.round
        if turn is None or turn.answer.id != message_id or not 0 <= index < len(turn.pendings):
            return  # (a card of an answer whose round is over: nothing to decide)
        p = turn.pendings[index]
        if p.decision is not None or p.result is not None or index in turn.running or self.session is None:
            return
        from ember_chat.engine.tools.session import Decision

        decision = {ALLOW: Decision.ONCE, ALWAYS: Decision.ALWAYS, DENY: Decision.DENY}.get(verb)
        if decision is None:
            return
        self.session.decide(p, decision)
        if decision == Decision.DENY:
            assert p.result is not None
            self._save(
                self.c.store.set_tool_result, turn.answer.id, p.result, p.entry.source if p.entry else None, "deny"
            )
        else:
            self._run(turn, index, str(decision))
        if decision == Decision.ALWAYS and self.c.conversation_id is not None:
            self._save(self._allow_always, turn.answer.conversation_id, p.entry.key if p.entry else None)
            for other, q in enumerate(turn.pendings):  # the same tool waiting in this answer: allowed too
                if q.needs_consent and q.decision is None and q.result is None and q.entry == p.entry:
                    q.decision = Decision.ALWAYS
                    self._run(turn, other, "always")
        self.c.refresh()
        self._maybe_continue()

    # ----- running (worker threads)
    def _run(self, turn: _Round, index: int, decision: str) -> None:
        p = turn.pendings[index]
        call = _plain(p)
        source = p.entry.source if p.entry is not None else None
        self._save(self.c.store.set_tool_state, turn.answer.id, call.id, call.name, "running", source, decision)
        turn.running.add(index)
        session = self.session
        assert session is not None
        self.tasks.run(
            lambda: session.run(p, turn.cancel),
            lambda result: self._on_result(turn, index, result),
            lambda message: self._on_result(turn, index, ToolResult(call.id, call.name, message, is_error=True)),
        )

    def _on_result(self, turn: _Round, index: int, result: ToolResult) -> None:
        turn.running.discard(index)
        if turn is not self.round:
            return  # stopped meanwhile: the card already says so
        p = turn.pendings[index]
        p.result = result
        decision = str(p.decision) if p.decision is not None else None
        self._save(self.c.store.set_tool_result, turn.answer.id, result, p.entry.source if p.entry else None, decision)
        self.c.refresh()
        self._maybe_continue()

    # ----- the next generation, or the end
    def _maybe_continue(self) -> None:
        turn, session = self.round, self.session
        if turn is None or session is None or turn.running or any(p.result is None for p in turn.pendings):
            return
        self.round = None
        if turn.capped:  # the model asked for more calls than an answer may make: the loop ends here
            self.c.notice.emit(session.limit_message())
            self._end()
            return
        messages = session.continuation(turn.history, turn.text, turn.pendings)
        if not self.c.continue_after_tools(turn.answer, messages):
            self._end()

    def stop(self) -> None:
        """Stop: the calls that run are cancelled, those waiting are not run, the loop ends."""
        turn = self.round
        if turn is None:
            return
        self.round = None
        turn.cancel.set()
        for p in turn.pendings:
            if p.result is None:
                call = _plain(p)
                p.result = ToolResult(call.id, call.name, STOPPED, is_error=True)
                source = p.entry.source if p.entry is not None else None
                self._save(self.c.store.set_tool_result, turn.answer.id, p.result, source, "cancelled")
        self._save(self._mark_stopped, turn.answer.id)
        self.c.refresh()
        self._end()

    def _mark_stopped(self, message_id: int) -> None:
        """The answer's metrics say it was stopped: its last generation ended in calls ("called tools"),
        but the user stopped it before they ran (or finished)."""
        answer = self.c.store.message(message_id)
        if answer.metrics and answer.metrics.get("stop_reason") == "tool_calls":
            self.c.store.update_message(message_id, answer.content, {**answer.metrics, "stop_reason": "cancelled"})

    def _allow_always(self, conversation_id: int, key: str | None) -> None:
        """The chat's stored choices gain this tool's "always allow" (merged with what is stored now: a
        change made in the Tools popup meanwhile is kept)."""
        if key is not None:
            stored = self.c.store.chat_tools(conversation_id)
            self.c.store.set_chat_tools(conversation_id, replace(stored, always=stored.always | {key}))

    def _save(self, write: Callable[..., None], *args: object, not_run: bool = False) -> bool:
        """A write to the chat store; a failing one (disk full, a folder that cannot be written) is said
        once. `not_run`: the answer's calls cannot be kept, so they are not run (and it says so)."""
        try:
            write(*args)
        except (sqlite3.Error, OSError) as exc:
            reason = describe_write_error(exc)
            if not_run:
                self.c.error.emit(
                    self.tr(
                        "Ember cannot save this answer's tool calls ({reason}), so they were not run. Free some "
                        "space (or fix the folder), then regenerate the answer."
                    ).format(reason=reason)
                )
            elif not self._save_failing:
                self.c.error.emit(
                    self.tr(
                        "Ember cannot save the tool calls' results right now ({reason}). The model still gets "
                        "them; what the cards show may be behind until saving works again."
                    ).format(reason=reason)
                )
            self._save_failing = True
            return False
        self._save_failing = False
        return True

    def _end(self) -> None:
        self.c.tools_done()

    def close(self) -> None:
        """At quit: calls still running are cancelled (their threads end on their own)."""
        if self.round is not None:
            self.round.cancel.set()
        self.tasks.shutdown()


def _plain(p: PendingCall) -> ToolCall:
    return p.call.call if isinstance(p.call, InvalidCall) else p.call
