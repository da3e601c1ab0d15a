"""One chat's tools between two user messages: which calls of an answer may run and which need the
user's consent first (every call does, unless the user allowed the tool for this chat or chose
"never ask" for a read-only tool), what a decision does, the cap on calls per answer, running an
allowed call on the tool the model meant, and the messages that give the results back to the model.

A call that is invalid, names a tool this chat does not offer, or comes over the cap never runs: its
result (an error the model reads) is set when it is triaged. The session lives on the GUI thread;
`run` is called on a worker thread (it blocks for as long as the tool runs)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.tools import CallBudget, ChatTools, InvalidCall, ToolCall, ToolRequest, ToolResult
from ember_chat.engine.errors import InvalidParameter, ToolError
from ember_chat.engine.tools.registry import ToolEntry, ToolRegistry

DENIED = "The user denied this call."
STOPPED = "The call was stopped before it ran."


class Decision(StrEnum):
    ONCE = "once"
    ALWAYS = "always"
    DENY = "deny"


@dataclass
class PendingCall:
    call: ToolCall | InvalidCall  # as the model wrote it (the exposed name)
    entry: ToolEntry | None
    needs_consent: bool  # False when invalid/over cap/unknown (result already set), in never_ask, or in chat.always
    result: ToolResult | None = None  # set when decided without running, or after `run`
    decision: Decision | None = None  # the user's answer; None when nobody was asked

    @property
    def tool_call(self) -> ToolCall:
        """The call as the model wrote it, valid or not."""
        return self.call.call if isinstance(self.call, InvalidCall) else self.call


class ChatToolSession:
    def __init__(
        self,
        registry: ToolRegistry,
        chat: ChatTools,
        never_ask: frozenset[str],
        max_calls: int,
        *,
        call_timeout_s: float | None = None,  # None: each source's own (an MCP server's call timeout)
    ) -> None:
        self.registry = registry
        self.chat = chat  # updated by Decision.ALWAYS (the caller stores it with the chat)
        self.never_ask = never_ask
        self.max_calls = max_calls
        self.call_timeout_s = call_timeout_s
        self._budget = CallBudget(max_calls)

    def request(self) -> ToolRequest | None:
        """The tools this chat has on, for the next generation; None when none is on (or known now).
        A chat whose model must call a tool (`chat.require_call`) requires a call until this answer made
        one (its first generation), then leaves it to the model ("auto": it answers with the results;
        the cap still ends a loop). The required turn is one call (not parallel): a model that does not
        call tools by itself, held to calls by the grammar, would otherwise write call after call until
        its token limit, and the answer would end there instead of with its calls."""
        on = self.registry.keys_on(self.chat)
        if self.chat.require_call and self._budget.used == 0:
            request = self.registry.request(on, "required")
            return replace(request, parallel=False) if request is not None else None
        return self.registry.request(on)

    def new_answer(self) -> None:
        """A new user message: the cap on calls counts again from zero."""
        self._budget = CallBudget(self.max_calls)

    # ----- triage and consent

    def triage(self, calls: Sequence[ToolCall | InvalidCall]) -> list[PendingCall]:
        """The answer's calls, in order, each with what it needs: every call counts against the cap
        (invalid ones too: a model that keeps writing bad calls is stopped as well)."""
        plain = [c.call if isinstance(c, InvalidCall) else c for c in calls]
        allowed, _ = self._budget.take(plain)
        on = self.registry.keys_on(self.chat)  # (read once: it walks every tool under the registry's lock)
        pendings = []
        for i, call in enumerate(calls):
            tool_call = plain[i]
            entry = self.registry.exposed(tool_call.name)
            if i >= len(allowed):
                result = ToolResult(tool_call.id, tool_call.name, self._budget.message, is_error=True)
                pendings.append(PendingCall(call, entry, False, result))
            elif isinstance(call, InvalidCall):
                pendings.append(PendingCall(call, entry, False, call.result()))
            elif entry is None or entry.key not in on:
                pendings.append(PendingCall(call, entry, False, self._unknown(call)))
            else:
                pendings.append(PendingCall(call, entry, not self._allowed_without_asking(entry)))
        return pendings

    def _allowed_without_asking(self, entry: ToolEntry) -> bool:
        # "never ask" is offered for read-only tools only; a tool that stopped saying it only reads asks again
        return entry.key in self.chat.always or (entry.key in self.never_ask and entry.spec.read_only)

    def _unknown(self, call: ToolCall) -> ToolResult:
        request = self.request()
        offered = ", ".join(t.name for t in request.tools) if request else ""
        text = f"There is no tool named '{call.name}' in this chat. " + (
            f"The tools you may call are: {offered}." if offered else "No tools are on in this chat."
        )
        return ToolResult(call.id, call.name, text, is_error=True)

    @property
    def budget_spent(self) -> bool:
        """This answer reached the cap: the loop ends with `limit_message`."""
        return self._budget.spent

    def limit_message(self) -> str:
        return self._budget.message

    def waiting(self, pending: PendingCall) -> bool:
        """The call still waits for the user's answer (after "Always allow" on another card of the same
        tool, it no longer does)."""
        return (
            pending.result is None
            and pending.decision is None
            and pending.needs_consent
            and (pending.entry is None or pending.entry.key not in self.chat.always)
        )

    def decide(self, pending: PendingCall, decision: Decision) -> None:
        """The user's answer on a consent card. DENY sets the denied result (the call never runs);
        ALWAYS allows this tool for the rest of this chat (`chat` changes: store it with the chat)."""
        if pending.result is not None:
            raise InvalidParameter(f"the call to {pending.tool_call.name} was already decided.")
        pending.decision = decision
        if decision is Decision.DENY:
            call = pending.tool_call
            pending.result = ToolResult(call.id, call.name, DENIED, is_error=True)
        elif decision is Decision.ALWAYS and pending.entry is not None:
            self.chat = replace(self.chat, always=self.chat.always | {pending.entry.key})

    # ----- running

    def run(self, pending: PendingCall, cancel: threading.Event | None = None) -> ToolResult:
        """Runs an allowed call on its source (under the tool's own name), on the calling (worker)
        thread; the result, with how long it took, is also kept in `pending.result`. A call whose
        result is already set (denied, invalid, unknown, over the cap) is not run: that result is returned."""
        if pending.result is not None:
            return pending.result
        if self.waiting(pending) or pending.entry is None:
            raise ToolError(f"The call to {pending.tool_call.name} needs the user's consent before it runs.")
        call = pending.tool_call
        if cancel is not None and cancel.is_set():
            pending.result = ToolResult(call.id, call.name, STOPPED, is_error=True)
            return pending.result
        entry = pending.entry
        started = time.perf_counter()
        try:
            result = entry.provider.call(
                ToolCall(call.id, entry.original_name, call.arguments, call.raw),
                self.call_timeout_s,  # type: ignore[arg-type]  # None: the source's own timeout
                cancel,
            )
        except Exception as e:  # a source's bug must not end the chat's loop: it is this call's error
            result = ToolResult(
                call.id, call.name, f"The tool {call.name} failed unexpectedly and gave no result ({e}).", True
            )
        elapsed_ms = (time.perf_counter() - started) * 1000
        pending.result = replace(result, call_id=call.id, name=call.name, duration_ms=elapsed_ms)
        return pending.result

    # ----- back to the model

    @staticmethod
    def continuation(
        messages: list[ChatMessage], answer_text: str, pendings: Sequence[PendingCall]
    ) -> list[ChatMessage]:
        """The conversation to generate from next: `messages`, the answer with its calls, then one tool
        message per call with its result (or why it did not run), in the calls' order."""
        missing = [p.tool_call.name for p in pendings if p.result is None]
        if missing:
            raise InvalidParameter(f"the call to {missing[0]} has no result yet; decide and run every call first.")
        calls = tuple(p.tool_call for p in pendings)
        answer = ChatMessage("assistant", answer_text, tool_calls=calls)
        return [*messages, answer, *(ChatMessage.from_tool_result(p.result) for p in pendings if p.result)]
