"""ChatController: the conversation logic between the store, the engine bridge and the views.

Send, stop, regenerate, edit-and-branch, switch branches, switch conversations. Anything that must
not overlap a running answer (switching or deleting a chat, loading a model, quitting) goes through
`after_stop`: stop first, act when the engine has finished.

It drives no widget: what the views show is said by its signals (the thread to show, the answer
streaming, the live metrics), which the window connects to the transcript and the side panel; the
transcript's message actions come in through `_on_action`. So it runs, and is tested, without a window.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtGui import QGuiApplication

from ember_chat.app.conversation.answer_saving import AnswerSaving
from ember_chat.app.conversation.attachments import LEFT_OUT
from ember_chat.app.conversation.tool_turns import ToolTurns
from ember_chat.app.engine_link.bridge import EngineBridge
from ember_chat.app.engine_link.wording import window_wording
from ember_chat.app.transcript.render.markdown_segments import code_blocks
from ember_chat.app.transcript.tool_cards import TOOL_VERBS
from ember_chat.engine.conversation.messages import thread_messages
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.tools import InvalidCall, ToolCall
from ember_chat.engine.errors import EmberError
from ember_chat.engine.inference.calls.preview import call_preview
from ember_chat.engine.inference.events import Retrying
from ember_chat.engine.inference.metrics import GenerationMetrics
from ember_chat.engine.projects.records import Project
from ember_chat.engine.projects.turn import ProjectKnowledge, project_system
from ember_chat.engine.storage.conversations import ConversationStore, Message
from ember_chat.engine.storage.streaming import StreamingMessage, describe_write_error
from ember_chat.engine.storage.titles import title_from_message

if TYPE_CHECKING:
    from ember_chat.app.conversation.attachments import ChatAttachments
    from ember_chat.engine.attachments import StoredAttachment
    from ember_chat.engine.inference.events import AttachmentsPlanned, KnowledgeUsed
    from ember_chat.engine.tools.session import ChatToolSession


class ChatController(QObject):
    generating_changed = Signal(bool)
    streamed = Signal(int)  # output tokens so far, after each batch reached the view
    error = Signal(str)
    notice = Signal(str)
    retrying = Signal(str, float, int, int)  # reason, delay s, attempt, attempts
    conversations_changed = Signal()
    chat_created = Signal(int)  # a new chat's first message created it (its id; before its thread shows)
    edit_requested = Signal(int)  # message id: the window puts its text in the composer
    delete_requested = Signal(int)  # message id: the window deletes it and what follows (undoable)
    # what the views show (the window connects them to the transcript and the metrics panel)
    thread_shown = Signal(object, object)  # messages, {message id: (branch, branches)}
    jump_requested = Signal(int)  # message id to scroll to (after thread_shown)
    thinking_toggled = Signal(int)  # message id whose thinking opens or folds (thread_shown follows)
    stream_began = Signal(int, object)  # the new answer's message id, the model's name (or None)
    stream_resumed = Signal(int)  # the answer continued, streaming below its text
    stream_rejoined = Signal(int)  # the answer streaming now, drawn again below the thread just shown
    stream_appended = Signal(str)  # text streamed
    call_streamed = Signal(int, str, str, bool)  # a tool call being written: index, name, arguments so far, read whole
    stream_ended = Signal(str, object, str)  # the whole text, its metrics line (or None), why it ended
    metrics_began = Signal()
    metrics_live = Signal(object)  # a live snapshot (dict)
    metrics_prefill = Signal(int, int)  # prompt tokens read, of
    metrics_finished = Signal(object, object)  # GenerationMetrics or None, inter-token latencies (ms)
    planned = Signal(int)  # the answer whose attachments' plan (how each is read, its Sources) is recorded
    project_used = Signal(object, object)  # a project chat's answer: its Project, then its KnowledgeUsed (or None)

    def __init__(
        self,
        store: ConversationStore,
        bridge: EngineBridge,
        params: Callable[[], tuple[SamplingParams, str]],
    ) -> None:
        """`params`: the sampling parameters and system prompt to answer with (asked at each send)."""
        super().__init__()
        self.store = store
        self.bridge = bridge
        self._params = params
        self.conversation_id: int | None = None
        self.request_id: int | None = None
        self._stream: StreamingMessage | None = None
        self._resumed = False
        self.saving = AnswerSaving(self.error.emit, self.notice.emit, self)  # when writes fail (answer_saving.py)
        self._after: list[Callable[[], None]] = []
        self.editing_parent: int | None = None
        self.editing = False
        self.model_ready = False
        self.model_name: str | None = None  # shown on each answer's header
        self.attachments: ChatAttachments | None = None  # keeps and sends attachments (attachments.py)
        # a chat's tools, asked before each answer (the composition gives the window's tools' session_for)
        self.tool_session_for: Callable[[int], ChatToolSession | None] | None = None
        self.tools = ToolTurns(self, parent=self)  # the tool loop: consent, calls, results, the next generation
        # a chat's project and the knowledge its answer is given (the window's projects; the knowledge is
        # closed when the answer ends), asked before each answer
        self.project_for: Callable[[int], tuple[Project, ProjectKnowledge | None] | None] | None = None
        self._knowledge: ProjectKnowledge | None = None  # the answer's, while it runs
        self._knowledge_used: KnowledgeUsed | None = None
        w = bridge
        w.tokens.connect(self._on_tokens)
        w.tool_writing.connect(self._on_tool_writing)
        w.tool_call.connect(self._on_tool_call)
        w.retrying.connect(self._on_retrying)
        w.started.connect(self._on_live)
        w.metrics.connect(self._on_live)
        w.trimmed.connect(self._on_trimmed)
        w.notice.connect(self._on_notice)
        w.prefill.connect(self._on_prefill)
        w.planned.connect(self._on_planned)
        w.knowledge.connect(self._on_knowledge)
        w.failed.connect(self._on_failed)
        w.finished.connect(self._on_finished)

    # ----- state
    @property
    def generating(self) -> bool:
        return self.request_id is not None or self.tools.active

    def after_stop(self, action: Callable[[], None]) -> None:
        """Run `action` now if idle, else stop the answer and run it once the engine is done."""
        if not self.generating:
            action()
            return
        self._after.append(action)
        self.stop()

    def quitting(self) -> None:
        """The window quits: what waited for the answer's end never runs (the engine stops next, and the
        answer ends as a stopped one)."""
        self._after.clear()

    def stop(self) -> None:
        if self.request_id is not None:
            self.bridge.stop(self.request_id)
        else:
            self.tools.stop()  # (calls waiting or running: the loop ends)

    # ----- conversations
    def open_conversation(self, conversation_id: int | None, jump_to: int | None = None) -> None:
        def act() -> None:
            self.conversation_id = conversation_id
            self.cancel_edit()
            self.refresh(jump_to)

        self.after_stop(act)

    def refresh(self, jump_to: int | None = None) -> None:
        if self.conversation_id is None:
            self.thread_shown.emit([], {})
            return
        messages, branches = self.store.thread_with_branches(self.conversation_id)
        live = self._stream
        if live is not None and messages and messages[-1].id == live.message.id:
            # The answer streaming now is saved only in part, as unfinished ("interrupted"): the thread
            # goes out as it was before it began (a continued answer with its text before the Continue),
            # and the view draws the live answer below it again, from what it streamed (a theme or text
            # size change re-writes the whole transcript while an answer streams).
            self.thread_shown.emit(messages[:-1] + ([live.message] if self._resumed else []), branches)
            self.stream_rejoined.emit(live.message.id)
        else:
            self.thread_shown.emit(messages, branches)
        if jump_to is not None:
            self.jump_requested.emit(jump_to)

    def delete_conversation(self, conversation_id: int) -> None:
        """Move a chat to the Trash (the answer streaming into it stops first); the window's list goes
        through chat_list/undo.py instead, which keeps the change to undo."""

        def act() -> None:
            self.store.organise.trash_chats([conversation_id])
            if self.conversation_id == conversation_id:
                self.conversation_id = None
                self.refresh()
            self.conversations_changed.emit()

        self.after_stop(act)

    # ----- sending
    def send(self, text: str, attachments: Sequence[StoredAttachment] = ()) -> bool:
        """Send a message (with these stored attachments); False when it was not sent (no model, busy,
        cannot be saved) — the window then keeps the text (and the attachments) in the composer."""
        if not self._model_ready() or self.generating:
            return False
        params, system_prompt = self._params()
        created = self.conversation_id is None
        try:
            if self.conversation_id is None:
                title = title_from_message(text) or (attachments[0].name if attachments else "New chat")
                conv = self.store.create_conversation(title, system_prompt=system_prompt, params=params.to_dict())
                self.conversation_id = conv.id
                self.chat_created.emit(conv.id)
            conv = self.store.conversation(self.conversation_id)
            if self.editing:
                parent = self.editing_parent
            else:
                thread = self.store.thread(conv.id)
                parent = thread[-1].id if thread else None
            user = self.store.add_message(conv.id, "user", text, parent_id=parent)
            if attachments and self.attachments is not None:
                self.attachments.link(user.id, attachments)
        except (sqlite3.Error, OSError) as exc:
            self.error.emit(
                self.tr(
                    "Ember cannot save your message ({reason}), so it was not sent; it is still "
                    "in the box below. Free some space (or fix the folder) and send it again."
                ).format(reason=describe_write_error(exc))
            )
            return False
        self.refresh()
        if not self._start(user):
            # Refused (only while Ember shuts down): take the question back, it stays in the box.
            self.store.delete_message(user.id)
            if created:
                self.store.delete_conversation(conv.id)
                self.conversation_id = None
            else:
                self.store.update_conversation(conv.id, active_leaf=user.parent_id)
            self.refresh()
            return False
        self.cancel_edit()
        self.conversations_changed.emit()
        return True

    def _model_ready(self) -> bool:
        """True when a model is loaded; else it says so (a send, Regenerate or Continue did nothing)."""
        if not self.model_ready:
            self.error.emit(self.tr("No model is loaded. Pick one from the model list at the top or the Models menu."))
        return self.model_ready

    def regenerate(self, answer_id: int | None = None) -> None:
        """A new answer to the same question (the last one by default), as a new branch."""
        if self.generating or self.conversation_id is None or not self._model_ready():
            return
        thread = self.store.thread(self.conversation_id)
        if answer_id is None:
            users = [m for m in thread if m.role == "user"]
            question = users[-1] if users else None
        else:
            parent = self.store.message(answer_id).parent_id
            question = self.store.message(parent) if parent is not None else None
        if question is not None:
            self.store.update_conversation(self.conversation_id, active_leaf=question.id)
            self.refresh()
            self._start(question)

    def start_edit(self, message_id: int) -> str:
        m = self.store.message(message_id)
        self.editing = True
        self.editing_parent = m.parent_id
        return m.content

    def cancel_edit(self) -> None:
        self.editing = False
        self.editing_parent = None

    def continue_answer(self, answer_id: int) -> None:
        """Continue an interrupted answer where it stopped (the model picks up after its text)."""
        if self.generating or self.conversation_id is None or not self._model_ready():
            return
        answer = self.store.message(answer_id)
        if answer.parent_id is None:
            return
        self.store.update_conversation(self.conversation_id, active_leaf=answer.id)
        self.refresh()
        self._start(self.store.message(answer.parent_id), resume=answer)

    def continue_after_tools(self, answer: Message, messages: list[ChatMessage]) -> bool:
        """The tool loop's next generation, below the answer whose calls have their results."""
        return self._start(answer, history=messages)

    def _start(self, user: Message, resume: Message | None = None, history: list[ChatMessage] | None = None) -> bool:
        """Ask the engine for an answer to `user`, then save and show the (empty) streaming answer.
        The request goes in first: if the engine refuses it, nothing half-saved is left. False when
        refused (the error is shown). `history`: what the engine is given (the tool loop's), instead
        of the thread up to `user`."""
        assert self.conversation_id is not None
        conv = self.store.conversation(self.conversation_id)
        params, system_prompt = self._params()
        continuing = history is not None
        turn = self.project_for(conv.id) if self.project_for is not None else None
        project, knowledge = turn if turn is not None else (None, None)
        if project is not None:  # the project's instructions, then the chat's own system prompt
            system_prompt = project_system(project.instructions, system_prompt)
        try:
            if history is None:  # the thread up to `user`, as the engine is given it (files, tool calls, resume)
                store = self.attachments.store if self.attachments is not None else None
                history = thread_messages(self.store.thread(conv.id, user.id), store, system_prompt, resume)
            tools = self.tools.prepare(conv.id, continuing)
            request_id = self.bridge.generate(history, params, tools=tools, knowledge=knowledge)
        except EmberError as exc:  # QueueFull (only while Ember shuts down), an attachment's file gone
            if knowledge is not None:
                knowledge.close()
            self.error.emit(str(exc))
            return False
        self.tools.sent(request_id, history)
        # The engine's results for this id arrive as queued signals, handled after this returns.
        self.request_id = request_id
        self._knowledge, self._knowledge_used = knowledge, None
        self._stream = StreamingMessage(self.store, conv.id, user.id, resume=resume)
        self._resumed = resume is not None
        if resume is not None:
            self.stream_resumed.emit(resume.id)
            space = resume.content[len(resume.content.rstrip()) :]
            if space:  # (the rendered text ends without it: the continuation starts after it, as it will)
                self.stream_appended.emit(space)
        else:
            self.stream_began.emit(self._stream.message.id, self.model_name)
        self.metrics_began.emit()
        self.project_used.emit(project, None)  # (None, None: no project; the side panel says nothing of one)
        if not continuing:
            self.generating_changed.emit(True)
        return True

    # ----- engine results
    @Slot(int, str, int)
    def _on_tokens(self, rid: int, text: str, _n: int) -> None:
        if rid == self.request_id and self._stream is not None:
            self._stream.append(text)
            self.stream_appended.emit(text)
            self.saving.report(self._stream)
            self.streamed.emit(_n)

    @Slot(int, int, str, str)
    def _on_tool_writing(self, rid: int, index: int, name: str, arguments: str) -> None:
        if rid == self.request_id and self._stream is not None:
            self.call_streamed.emit(index, name, arguments, False)

    @Slot(int, int, object)
    def _on_tool_call(self, rid: int, index: int, call: ToolCall | InvalidCall) -> None:
        """A call read whole: shown as written until the answer ends (the tool loop keeps it: tool_turns.py)."""
        if rid == self.request_id and self._stream is not None:
            plain = call.call if isinstance(call, InvalidCall) else call
            if plain.arguments:
                arguments = json.dumps(plain.arguments, ensure_ascii=False)
            else:
                arguments = call_preview(plain.raw).arguments if isinstance(call, InvalidCall) else "{}"
            self.call_streamed.emit(index, plain.name, arguments, True)

    @Slot(int, object)
    def _on_live(self, rid: int, snapshot: dict[str, Any]) -> None:
        if rid == self.request_id:
            self.metrics_live.emit(snapshot)

    @Slot(int, object)
    def _on_retrying(self, rid: int, event: Retrying) -> None:
        if rid == self.request_id:
            self.retrying.emit(event.reason, event.delay_s, event.attempt, event.attempts)

    @Slot(int, int)
    def _on_trimmed(self, rid: int, dropped: int) -> None:
        if rid == self.request_id:
            self.notice.emit(
                self.tr(
                    "This chat is longer than the model's context: the {dropped} oldest messages were left out "
                    "of this answer's prompt."
                ).format(dropped=dropped)
            )

    @Slot(int, int, int)
    def _on_prefill(self, rid: int, done: int, total: int) -> None:
        if rid == self.request_id:
            self.metrics_prefill.emit(done, total)

    @Slot(int, object)
    def _on_planned(self, rid: int, event: AttachmentsPlanned) -> None:
        """How this answer's attachments were read, and its Sources: kept with the answer."""
        if rid == self.request_id and self._stream is not None and self.attachments is not None:
            self.attachments.record(self._stream.message.id, event.plan)
            self.planned.emit(self._stream.message.id)

    @Slot(int, object)
    def _on_knowledge(self, rid: int, event: KnowledgeUsed) -> None:
        """The project's passages this answer was given: kept with it (its Sources when it is shown)."""
        if rid != self.request_id or self._stream is None:
            return
        self._knowledge_used = event
        if self.attachments is not None:
            try:
                self.attachments.record_knowledge(self._stream.message.id, event)
            except (sqlite3.Error, OSError) as exc:
                self.notice.emit(
                    self.tr("This answer's sources could not be saved ({reason}).").format(
                        reason=describe_write_error(exc)
                    )
                )
            self.planned.emit(self._stream.message.id)
        knowledge = self._knowledge
        self.project_used.emit(knowledge.project if knowledge is not None else None, event)

    @Slot(int, str)
    def _on_notice(self, rid: int, message: str) -> None:
        if rid == self.request_id:
            self.notice.emit(message)

    @Slot(int, str)
    def _on_failed(self, rid: int, message: str) -> None:
        if rid == self.request_id:
            self.error.emit(message)

    @Slot(int, str, str, object, object)
    def _on_finished(
        self, rid: int, reason: str, _text: str, metrics: GenerationMetrics | None, itl: list[float]
    ) -> None:
        if rid != self.request_id:
            return
        stream, self._stream = self._stream, None
        self.request_id = None
        knowledge, self._knowledge = self._knowledge, None
        used, self._knowledge_used = self._knowledge_used, None
        if knowledge is not None:
            knowledge.close()  # (the engine is done with it: the answer ended)
        self.metrics_finished.emit(metrics, itl)
        if stream is not None and not stream.text and not self._resumed and (reason == "error" or metrics is None):
            # Nothing was generated (failed, or cancelled while still waiting in the queue): drop the
            # empty answer; the question stays, ready to retry.
            self.store.delete_message(stream.message.id)
            self.store.update_conversation(stream.message.conversation_id, active_leaf=stream.message.parent_id)
            self.refresh()
        elif stream is not None:
            record = metrics.to_dict() if metrics else None
            if record is not None and self.model_name:
                record["model"] = self.model_name  # as the header said while it streamed (a starter's name)
            if record is not None and used is not None and used.left_out:
                record[LEFT_OUT] = used.left_out  # (said under it when the chat is shown again)
            saved = stream.finish(record)
            if not saved:
                self.saving.keep(stream, record)
            if self.tools.after_answer(rid, reason, stream.message, stream.text):
                self.conversations_changed.emit()
                return  # its calls' cards are shown: the loop goes on (tools_done ends it)
            if saved and (self._resumed or reason == "interrupted" or len(self.store.siblings(stream.message.id)) > 1):
                # a continued answer is re-rendered whole; an interrupted one gets its Continue link;
                # a regenerated one needs the branch switcher's new count
                self.refresh()
            else:
                summary = metrics.summary_line(window_wording()) if metrics else None
                self.stream_ended.emit(stream.text, summary, reason)
        self.tools_done()

    def tools_done(self) -> None:
        """The answer is over (with or without tool calls): idle again, and what waited for it runs."""
        self.conversations_changed.emit()
        self.generating_changed.emit(False)
        pending, self._after = self._after, []
        for action in pending:
            action()

    # ----- message actions (links in the transcript)
    def _on_action(self, verb: str, message_id: int, arg: int) -> None:
        """A link clicked in the transcript: `verb` on message `message_id` (`arg`: which code block)."""
        if verb == "copy":
            QGuiApplication.clipboard().setText(self.store.message(message_id).content)
        elif verb == "copycode":
            blocks = code_blocks(self.store.message(message_id).content)
            if arg < len(blocks):
                QGuiApplication.clipboard().setText(blocks[arg])
        elif verb == "regenerate":
            self.regenerate(message_id)
        elif verb == "continue":
            self.continue_answer(message_id)
        elif verb == "edit":
            self.edit_requested.emit(message_id)
        elif verb == "delete":
            self.delete_requested.emit(message_id)
        elif verb == "think":
            self.thinking_toggled.emit(message_id)
            self.refresh()
        elif verb in TOOL_VERBS:
            self.tools.on_action(verb, message_id, arg)
        elif verb in ("prev", "next"):
            self.after_stop(lambda: self.switch_branch(message_id, -1 if verb == "prev" else 1))

    def switch_branch(self, message_id: int, step: int) -> None:
        sibs = self.store.siblings(message_id)
        ids = [s.id for s in sibs]
        target = ids[(ids.index(message_id) + step) % len(ids)]
        leaf = self.store.newest_leaf(target)
        self.store.update_conversation(sibs[0].conversation_id, active_leaf=leaf)
        self.refresh()
