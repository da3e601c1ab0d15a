"""MCP servers as tool providers, through the official `mcp` SDK on an asyncio loop of its own (a
background thread, never the GUI thread). A server starts on demand, with a start timeout; a call
has a timeout and a cancel; a stdio server that hangs is killed with its whole process group; one
that crashes gives the call an error result in words and is started again by the next call."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ember_chat.engine.core.tools import ToolCall, ToolResult, ToolSpec
from ember_chat.engine.errors import SecretStoreError, ToolError
from ember_chat.engine.storage.secrets import SecretStore
from ember_chat.engine.tools.mcp_config import McpServerConfig, header_secret
from ember_chat.engine.tools.mcp_log import GRACE_S, LOG_HINT, ServerLog
from ember_chat.engine.tools.mcp_loop import LoopThread

if TYPE_CHECKING:  # the MCP SDK (and its HTTP stack) is imported when a server starts, not with the window
    import mcp_types as types
    from mcp.client.session import ClientSession

    from ember_chat.engine.tools.mcp_connection import Connection

T = TypeVar("T")
_POLL_S = 0.05  # how often a waiting call looks at its cancel event
_END_WAIT_S = GRACE_S + 8.0  # a stopping server's transport is closed within this (the kill is bounded)
_MAX_PAGES = 50


class _Cancelled(Exception):
    """The caller stopped waiting for a server to start."""


class McpServer:
    """One configured MCP server (a core.tools.ToolProvider). Thread-safe: called from worker threads."""

    def __init__(
        self, config: McpServerConfig, secrets: SecretStore | None = None, loop: LoopThread | None = None
    ) -> None:
        self.config = config
        self._secrets = secrets
        self._loop = loop or LoopThread(f"ember-mcp-{config.name}")
        self._own_loop = loop is None
        self._log = ServerLog()
        self._start_lock = threading.Lock()  # one start at a time (held while a server starts)
        self._lock = threading.Lock()  # the current run; never held while waiting
        self._conn: Connection | None = None
        self._error: str | None = None  # a failure before any connection (a secret that is not there)
        self._starts = 0
        self._ending: list[Connection] = []  # runs told to stop that may still be ending
        self._retired = False  # taken out of its manager: never started again

    @property
    def source(self) -> str:
        return self.config.name

    @property
    def state(self) -> str:
        """ "stopped" | "starting" | "running" | "failed"."""
        conn = self._conn
        if conn is None:
            return "failed" if self._error else "stopped"
        if not conn.ready.is_set():
            return "starting"
        if conn.usable:
            return "running"
        return "failed" if conn.error else "stopped"

    @property
    def last_error(self) -> str | None:
        conn = self._conn
        return conn.error if conn is not None else self._error

    def stderr_text(self) -> str:
        return self._log.text()

    @property
    def pid(self) -> int | None:
        """The stdio server's process id (also its process group's id) while it starts or runs."""
        conn = self._conn
        process = conn.process if conn is not None and not conn.done.is_set() else None
        return process.pid if process is not None else None

    # ----- ToolProvider

    def list_tools(self, timeout_s: float | None = None) -> list[ToolSpec]:
        conn = self._connect()
        timeout = self.config.start_timeout_s if timeout_s is None else timeout_s
        session = conn.session
        if session is None:
            raise ToolError(f"The MCP server {self.source!r} was stopped before it listed its tools.")
        future = self._loop.submit(self._list(session))
        if not self._wait(future, timeout, None):
            future.cancel()
            message = f"The MCP server {self.source!r} did not list its tools within {timeout:g} s"
            raise ToolError(self._gave_up(conn, message))
        try:
            tools = future.result()
        except Exception as exc:  # the server broke the protocol or went away
            raise ToolError(self._call_failure(conn, exc, "while listing its tools")) from None
        from ember_chat.engine.tools.mcp_results import usable_specs

        skipped: list[str] = []
        specs = usable_specs(tools, skipped)
        for line in skipped:
            self._log.note(line)
        return specs

    def call(self, call: ToolCall, timeout_s: float | None = None, cancel: threading.Event | None = None) -> ToolResult:
        def result(text: str, error: bool, ran: bool = True) -> ToolResult:
            duration = (time.perf_counter() - began) * 1000 if ran else None
            return ToolResult(call.id, call.name, text, is_error=error, duration_ms=duration)

        began = time.perf_counter()
        try:
            conn = self._connect(cancel)
        except ToolError as exc:
            return result(str(exc), True, ran=False)
        except _Cancelled:
            return result("The call was stopped before it ran (its server was still starting).", True, ran=False)
        if cancel is not None and cancel.is_set():
            return result("The call was stopped before it ran.", True, ran=False)
        began = time.perf_counter()
        session = conn.session
        if session is None:  # stopped (settings changed, the app closing) since it was started
            return result(f"The MCP server {self.source!r} was stopped before the call ran.", True, ran=False)
        future = self._loop.submit(session.call_tool(call.name, call.arguments or None))
        timeout = self.config.call_timeout_s if timeout_s is None else timeout_s
        if not self._wait(future, timeout, cancel):
            future.cancel()
            if cancel is not None and cancel.is_set():
                return result("The call was stopped before the tool answered.", True)
            message = f"The tool {call.name!r} of the MCP server {self.source!r} did not answer within {timeout:g} s"
            return result(self._gave_up(conn, message), True)
        try:
            answer = future.result()
        except Exception as exc:
            return result(self._call_failure(conn, exc, f"while running {call.name!r}"), True)
        import mcp_types as types  # (loaded with the server's connection)

        from ember_chat.engine.tools.mcp_results import result_text

        if not isinstance(answer, types.CallToolResult):
            return result(f"The MCP server {self.source!r} gave an answer Ember cannot use.", True)
        text = result_text(answer.content, answer.structured_content)
        if answer.is_error:
            return result(text or "The tool reported an error without saying what.", True)
        return result(text, False)

    def stop(self, wait: bool = True) -> None:
        """Stop the server (stdio: stdin closed, then its process group killed) and, with `wait`, wait
        until it is gone (also any earlier run still ending)."""
        with self._lock:
            conn, self._conn, self._error = self._conn, None, None
            if conn is not None:
                self._ending.append(conn)
                self._end(conn, hard=False, wait=False)
            ending = list(self._ending)
        if wait:
            for old in ending:
                old.done.wait(_END_WAIT_S)
            with self._lock:
                self._ending = [c for c in self._ending if not c.done.is_set()]
            if self._own_loop:
                self._loop.close()

    def retire(self) -> None:
        """Stop it for good (its manager no longer has it), without waiting: a caller still holding it
        gets a sentence instead of starting a process nobody would stop."""
        with self._lock:
            self._retired = True
        self.stop(wait=False)

    # ----- inside

    def _connect(self, cancel: threading.Event | None = None) -> Connection:
        """The running connection, started now when there is none (raises ToolError). With `cancel`,
        the wait for a start ends when it is set (_Cancelled); the start goes on for the next caller."""
        with self._start_lock:
            conn = self._conn
            if conn is None or conn.ready.is_set():  # none, or not one still starting: start one
                if conn is not None and conn.usable:
                    return conn
                if conn is not None and not conn.done.is_set():
                    self._end(conn, hard=True, wait=True)
                conn = self._start()
            deadline = conn.began + self.config.start_timeout_s + _END_WAIT_S  # its own timer fires first
            while not conn.ready.wait(max(0.0, min(_POLL_S if cancel else 1.0, deadline - time.monotonic()))):
                if cancel is not None and cancel.is_set():
                    raise _Cancelled
                if time.monotonic() >= deadline:
                    conn.error = f"The MCP server {self.source!r} did not start; Ember stopped it. {LOG_HINT}"
                    self._end(conn, hard=True, wait=True)
                    break
            if not conn.usable:
                conn.done.wait(_END_WAIT_S)
                error = conn.error or f"The MCP server {self.source!r} was stopped while it was starting."
                self._log.note(error)
                raise ToolError(error)
            return conn

    def _start(self) -> Connection:
        try:
            headers = self._headers()
        except ToolError as exc:
            with self._lock:
                self._conn, self._error = None, str(exc)
            raise
        from ember_chat.engine.tools.mcp_connection import Connection  # the SDK, from the first start on

        conn = Connection(self.config, self._log, headers)
        with self._lock:
            if self._retired:
                raise ToolError(
                    f"The MCP server {self.source!r} is no longer in use (its settings changed or it was removed)."
                )
            self._conn, self._error = conn, None
        self._starts += 1
        if self._starts > 1:
            self._log.note("Starting the server again.")
        self._loop.submit(conn.run())
        return conn

    def _headers(self) -> dict[str, str]:
        headers = dict(self.config.headers)
        if not self.config.secret_headers:
            return headers
        secrets = self._secrets or SecretStore()
        for header in self.config.secret_headers:
            try:
                value = header_secret(self.source, header, secrets)
            except SecretStoreError as exc:
                raise ToolError(str(exc)) from None
            if not value:
                raise ToolError(
                    f"The {header} header of the MCP server {self.source!r} is not in the system keychain; "
                    "enter it again in Settings ▸ Tools."
                )
            headers[header] = value
        return headers

    async def _list(self, session: ClientSession) -> list[types.Tool]:
        import mcp_types as types

        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    def _wait(self, future: concurrent.futures.Future[Any], timeout: float, cancel: threading.Event | None) -> bool:
        """True once the future is done; False at the timeout or when `cancel` is set."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (cancel is not None and cancel.is_set()):
                return future.done()
            step = remaining if cancel is None else min(remaining, _POLL_S)
            done, _ = concurrent.futures.wait([future], timeout=step)
            if done:
                return True

    def _end(self, conn: Connection, hard: bool, wait: bool) -> None:
        conn.stop_requested = conn.stop_requested or not hard
        conn.kill_now = conn.kill_now or hard
        self._loop.call_soon(conn.end)
        if wait and not self._loop.in_loop():
            conn.done.wait(_END_WAIT_S)

    def _gave_up(self, conn: Connection, message: str) -> str:
        """A server that does not answer: a stdio one is killed with its process group (it is hung and
        would hold the next call too); over HTTP only this request is abandoned."""
        if self.config.transport != "stdio":
            return f"{message}; Ember gave up waiting."
        error = f"{message}, so Ember stopped the server. It starts again when one of its tools is next used."
        conn.error = error
        self._log.note(error)
        self._end(conn, hard=True, wait=True)
        return error

    def _call_failure(self, conn: Connection, exc: BaseException, during: str) -> str:
        """Why a request failed: the server went away (crash), refused it, or answered nonsense."""
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        from ember_chat.engine.tools.mcp_http import http_refusal

        if self.config.transport == "http":
            refusal = http_refusal(self.source, conn.trace)
            if refusal:
                conn.error = refusal
                self._log.note(refusal)
                self._end(conn, hard=True, wait=False)  # connect again at the next call
                return refusal
        if isinstance(exc, MCPError) and exc.code == types.CONNECTION_CLOSED:
            if conn.stop_requested:
                return (
                    f"The MCP server {self.source!r} was stopped {during} (its settings changed, or Ember is closing)."
                )
            conn.done.wait(_END_WAIT_S)
            error = (
                f"The MCP server {self.source!r} stopped {during}{conn.exit_note}{conn.last_words()}. "
                f"Ember starts it again when one of its tools is next used. {LOG_HINT}"
            )
            conn.error = error
            self._log.note(error)
            return error
        if isinstance(exc, MCPError):
            return f"The MCP server {self.source!r} refused the request: {exc.message.rstrip('.')}."
        return f"The MCP server {self.source!r} gave an answer Ember cannot use: {exc or type(exc).__name__}."


class McpManager:
    """The configured MCP servers, on one loop thread; `configure` starts nothing."""

    def __init__(self, secrets: SecretStore | None = None) -> None:
        self._secrets = secrets
        self._loop = LoopThread("ember-mcp")
        self._lock = threading.Lock()
        self._servers: dict[str, McpServer] = {}
        self._stopped: list[McpServer] = []

    def configure(self, servers: Sequence[McpServerConfig]) -> None:
        """Take the settings: servers removed, disabled or changed are stopped (in the background);
        unchanged running ones keep running."""
        with self._lock:
            old = self._servers
            new: dict[str, McpServer] = {}
            for config in servers:
                if not config.enabled:
                    continue
                kept = old.get(config.name)
                new[config.name] = (
                    kept if kept is not None and kept.config == config else McpServer(config, self._secrets, self._loop)
                )
            self._servers = new
        for name, server in old.items():
            if new.get(name) is not server:
                server.retire()
                with self._lock:
                    self._stopped.append(server)  # `close` waits until it is gone

    def servers(self) -> list[McpServer]:
        with self._lock:
            return list(self._servers.values())

    def server(self, name: str) -> McpServer | None:
        with self._lock:
            return self._servers.get(name)

    def close(self) -> None:
        """Stop every server (waiting until each is gone) and join the loop thread."""
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.retire()  # all at once (each one's grace runs in parallel), and never started again
        for server in [*servers, *self._stopped]:
            server.stop(wait=True)
        self._stopped = []
        self._loop.close()


def run_blocking(loop: LoopThread, coro: Coroutine[Any, Any, T], timeout: float) -> T:
    """Run a coroutine on the MCP loop and wait for it (helpers and tests)."""
    return loop.submit(coro).result(timeout)
