"""One run of an MCP server: its transport (stdio process or streamable HTTP) and the official SDK's
ClientSession, owned by one task on the MCP loop from start to stop, and what went wrong, in words."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from contextlib import AsyncExitStack

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from ember_chat.engine import __version__
from ember_chat.engine.tools.mcp_config import McpServerConfig
from ember_chat.engine.tools.mcp_http import HttpTrace, http_refusal, http_transport
from ember_chat.engine.tools.mcp_log import LOG_HINT
from ember_chat.engine.tools.mcp_stdio import ProcessState, ServerLog, stdio_transport

CLIENT_INFO = types.Implementation(name="ember-chat", version=__version__)


def first_leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class Connection:
    """Created on a caller's thread, `run` on the loop. `ready` is set once the session is usable or
    the start failed; `done` once the transport is closed (the process group is gone)."""

    def __init__(self, config: McpServerConfig, log: ServerLog, headers: dict[str, str]) -> None:
        self.config = config
        self.log = log
        self.headers = headers
        self.began = time.monotonic()
        self.ready = threading.Event()
        self.done = threading.Event()
        self.session: ClientSession | None = None
        self.error: str | None = None  # why it is not running (None: it runs, or was stopped on purpose)
        self.process: ProcessState | None = None
        self.trace = HttpTrace()
        self.stop_requested = False
        self.kill_now = False
        self._scope: anyio.CancelScope | None = None

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def usable(self) -> bool:
        return self.session is not None and not self.done.is_set() and not self.stop_requested and not self.error

    # ----- on the loop thread

    def end(self) -> None:
        """Stop the run (called on the loop): the transport's exit stops the server."""
        if self.process is not None and self.kill_now:
            self.process.kill_now = True
        if self._scope is not None:
            self._scope.cancel()

    async def run(self) -> None:
        failure: BaseException | None = None
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                if self.stop_requested:
                    scope.cancel()
                async with AsyncExitStack() as stack:
                    if self.config.transport == "stdio":
                        self.process = ProcessState(kill_now=self.kill_now)
                        streams = await stack.enter_async_context(stdio_transport(self.config, self.log, self.process))
                    else:
                        streams = await stack.enter_async_context(
                            http_transport(self.config.url, self.headers, self.trace)
                        )
                    session = await stack.enter_async_context(
                        ClientSession(*streams, client_info=CLIENT_INFO, logging_callback=self._server_said)
                    )
                    try:
                        with anyio.fail_after(self.config.start_timeout_s):
                            await session.initialize()
                    except TimeoutError:
                        if self.process is not None:
                            self.process.kill_now = True
                        raise
                    self.session = session
                    self.ready.set()
                    if self.process is not None:
                        await self.process.closed.wait()  # the server went away on its own
                    else:
                        await anyio.sleep_forever()
        except Exception as exc:
            failure = first_leaf(exc)
        finally:
            self.session = None
            if self.error is None and not self.stop_requested:
                self.error = self._describe(failure)
            self.ready.set()
            self.done.set()

    async def _server_said(self, params: types.LoggingMessageNotificationParams) -> None:
        """A log message the server sent over MCP (not on stderr): into its log too."""
        data = params.data if isinstance(params.data, str) else json.dumps(params.data, ensure_ascii=False)
        source = f" {params.logger}" if params.logger else ""
        self.log.append(f"[{params.level}{source}] {data}\n".encode(errors="replace"))

    # ----- what went wrong

    @property
    def exit_note(self) -> str:
        code = self.process.returncode if self.process else None
        if code is None:
            return ""
        return f" (exit code {code})" if code >= 0 else f" (killed by signal {-code})"

    def last_words(self) -> str:
        line = self.log.last_line()
        return f": {line}" if line else ""

    def _describe(self, failure: BaseException | None) -> str:
        name = self.name
        if failure is None:  # it ran, then went away by itself
            return (
                f"The MCP server {name!r} stopped on its own{self.exit_note}{self.last_words()}. "
                f"Ember starts it again when one of its tools is next used. {LOG_HINT}"
            )
        if isinstance(failure, TimeoutError):
            return (
                f"The MCP server {name!r} did not start within {self.config.start_timeout_s:g} s, so Ember "
                f"stopped it. Check its command and settings. {LOG_HINT}"
            )
        if self.config.transport == "http":
            refusal = http_refusal(name, self.trace)
            if refusal:
                return refusal
        if isinstance(failure, OSError) and self.session is None and (self.process is None or not self.process.pid):
            return self._spawn_failure(failure)
        if isinstance(failure, MCPError):
            if self.process is not None and self.process.returncode is not None:
                return f"The MCP server {name!r} exited while starting{self.exit_note}{self.last_words()}. {LOG_HINT}"
            return f"The MCP server {name!r} refused to start: {failure.message}."
        return f"The MCP server {name!r} could not be started: {failure or type(failure).__name__}."

    def _spawn_failure(self, failure: OSError) -> str:
        name, command, cwd = self.name, self.config.command, self.config.cwd
        if cwd and not os.path.isdir(cwd):
            return f"The working folder {cwd} of the MCP server {name!r} does not exist; change it in Settings ▸ Tools."
        if isinstance(failure, FileNotFoundError) or (shutil.which(command) is None and os.sep not in command):
            return (
                f"Ember could not start the MCP server {name!r}: the command {command!r} was not found. "
                "Install it, or give its full path in Settings ▸ Tools."
            )
        if isinstance(failure, PermissionError):
            return f"Ember could not start the MCP server {name!r}: {command!r} is not allowed to run."
        return f"Ember could not start the MCP server {name!r}: {failure.strerror or failure}."
