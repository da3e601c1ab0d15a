"""Ember's stdio transport for MCP servers, for the official SDK's ClientSession: the server runs in a
process group of its own (the whole group is killed when Ember stops it, or at once on a hang), its
stderr is kept (the last 64 KB, for the log view), and neither a flood of stderr nor lines on stdout
that are not MCP messages can block it or Ember.

The SDK's own `stdio_client` does not give the process id (needed to kill the group at once on a
hang, instead of after its seconds of grace) nor a bounded log of stderr, hence this one; messages
are read and written with the SDK's own types (`SessionMessage`, `jsonrpc_message_adapter`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import anyio.abc
import mcp_types as types
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from ember_chat.engine.tools.mcp_config import McpServerConfig
from ember_chat.engine.tools.mcp_log import GRACE_S, ServerLog

__all__ = ["GRACE_S", "ServerLog", "server_environment", "stdio_transport"]

LINE_LIMIT = 64 * 1024 * 1024  # a message longer than this ends the connection
_CHUNK = 65536
# Besides the few variables the SDK passes (HOME, PATH, USER, …): the language, the temporary folder,
# proxies and certificates, which servers that fetch need. Nothing else of Ember's environment (no
# keys or tokens) reaches a server unless its settings give it.
_PASSED_ON = (
    "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TEMP", "TMP", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
    "http_proxy", "https_proxy", "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR",
)  # fmt: skip


def server_environment(config: McpServerConfig) -> dict[str, str]:
    passed = {k: os.environ[k] for k in _PASSED_ON if k in os.environ}
    return get_default_environment() | passed | config.env


@dataclass
class ProcessState:
    """What the connection's owner needs to know about the process."""

    pid: int | None = None
    returncode: int | None = None
    kill_now: bool = False  # a hang: kill the group without the grace period
    closed: anyio.Event = field(default_factory=anyio.Event)  # stdout ended: the server is gone (or going)
    noise_lines: int = 0  # lines on stdout that were not MCP messages


def _kill_group(process: anyio.abc.Process) -> None:
    """SIGKILL to the server's whole process group (pgid == its pid); where there are no process
    groups (Windows), to the process alone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if hasattr(os, "killpg"):
            os.killpg(process.pid, signal.SIGKILL)
        elif process.returncode is None:
            process.kill()


async def _wait_exit(process: anyio.abc.Process, timeout: float) -> bool:
    with anyio.move_on_after(timeout):
        await process.wait()
        return True
    return process.returncode is not None


@asynccontextmanager
async def stdio_transport(
    config: McpServerConfig, log: ServerLog, state: ProcessState
) -> AsyncIterator[tuple[anyio.abc.ObjectReceiveStream, anyio.abc.ObjectSendStream]]:
    """Start the server (OSError when it cannot be run) and yield the (read, write) streams of
    SessionMessages the SDK's ClientSession takes. Leaving stops the server and its process group."""
    # Shielded: a stop that came while the process was being made must not lose it half-made (asyncio
    # would kill it and then be cancelled before reaping it, leaving its pipes and a zombie behind);
    # the stop takes effect at the first wait after, and `stop()` below ends the process.
    with anyio.CancelScope(shield=True):
        process = await anyio.open_process(
            [config.command, *config.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=server_environment(config),
            cwd=config.cwd,
            start_new_session=True,  # its own process group: pgid == pid
        )
    state.pid = process.pid
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_stdout() -> None:
        assert process.stdout is not None
        buffer = bytearray()
        try:
            async with read_writer:
                while True:
                    try:
                        chunk = await process.stdout.receive(_CHUNK)
                    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                        break
                    buffer += chunk
                    while (end := buffer.find(b"\n")) >= 0:
                        line = bytes(buffer[:end])
                        del buffer[: end + 1]
                        await _deliver(line)
                    if len(buffer) > LINE_LIMIT:
                        log.note(f"The server wrote a line over {LINE_LIMIT // 2**20} MB on stdout; Ember stopped it.")
                        break
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the session is gone
        finally:
            state.closed.set()

    async def _deliver(line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            state.noise_lines += 1
            if state.noise_lines <= 3:
                shown = line[:200].decode("utf-8", errors="replace")
                log.note(f"The server wrote a line on stdout that is not an MCP message (ignored): {shown}")
            return
        await read_writer.send(SessionMessage(message))

    stderr_done = anyio.Event()

    async def read_stderr() -> None:
        assert process.stderr is not None
        try:
            with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                while True:
                    log.append(await process.stderr.receive(_CHUNK))
        finally:
            stderr_done.set()

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            state.closed.set()  # the server stopped reading: it is gone

    async def stop() -> None:
        pgid = process.pid
        if not state.kill_now and process.returncode is None:
            with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                assert process.stdin is not None
                await process.stdin.aclose()
            await _wait_exit(process, GRACE_S)
        _kill_group(process)  # the group: also whatever the server started (npx's node, a helper)
        if not await _wait_exit(process, 5.0):
            log.note(f"The server's process {pgid} did not end after it was killed.")
        state.returncode = process.returncode
        with anyio.move_on_after(1.0):  # its last words (a process outside the group may hold the pipe)
            await stderr_done.wait()
        for stream in (write_stream, read_stream, process.stdin, process.stdout, process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError, anyio.BrokenResourceError):
                    await stream.aclose()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_stdout)
        tasks.start_soon(read_stderr)
        tasks.start_soon(write_stdin)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await stop()
            tasks.cancel_scope.cancel()
    with contextlib.suppress(Exception):
        await process.aclose()
