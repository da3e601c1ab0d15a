"""Real OpenAI-compatible peers started on 127.0.0.1 for tests and benchmarks, each in its own process:
llama-cpp-python's own server (`python -m llama_cpp.server`), ready when uvicorn says so on stderr,
and Ember's (`ember-chat serve`), ready when it says it is serving (no polling)."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.helpers.entry_point import ember_chat


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _serving(
    command: list[str],
    ready: str,
    timeout_s: float,
    env: dict[str, str] | None = None,
    log: list[str] | None = None,
    pid: list[int] | None = None,
) -> Iterator[re.Match[str]]:
    """Run `command` (in `env`, else this environment); yield the first stderr line's match of `ready`
    once it appears (its log is read to the end meanwhile, into `log` when given; its process id into
    `pid` when given). Fails after
    `timeout_s` or if the process ends first. Terminated (both servers exit cleanly on SIGTERM) and
    reaped at exit."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    if pid is not None:
        pid.append(proc.pid)
    seen = threading.Event()
    found: list[re.Match[str]] = []
    log = [] if log is None else log

    def read_log() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line)
            match = re.search(ready, line)
            if match and not found:
                found.append(match)
                seen.set()
        seen.set()  # the process ended: stop waiting

    reader = threading.Thread(target=read_log, name="peer-server-log", daemon=True)
    reader.start()
    try:
        if not seen.wait(timeout_s) or not found:
            raise RuntimeError(f"{' '.join(command[:4])} did not start:\n" + "".join(log[-20:]))
        yield found[0]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join()
        proc.stderr.close()


@contextmanager
def llama_cpp_server(
    model: Path,
    threads: int = 2,
    n_ctx: int = 1024,
    timeout_s: float = 120,
    alias: str | None = None,
    extra: tuple[str, ...] = (),
) -> Iterator[str]:
    """llama-cpp-python's server on `model` (served as `alias`, else as its path; `extra`: more of its
    flags); yields its base URL (…/v1)."""
    port = free_port()
    command = [
        sys.executable, "-m", "tests.helpers.llama_cpp_server", "--model", str(model), "--host", "127.0.0.1",
        "--port", str(port),
        "--n_ctx", str(n_ctx), "--n_threads", str(threads), "--n_threads_batch", str(threads),
        "--interrupt_requests", "false", "--verbose", "false", *(["--model_alias", alias] if alias else []), *extra,
    ]  # fmt: skip
    with _serving(command, r"Uvicorn running on", timeout_s):
        yield f"http://127.0.0.1:{port}/v1"


@contextmanager
def ember_server(
    model: Path,
    threads: int = 2,
    n_ctx: int = 1024,
    timeout_s: float = 120,
    extra: tuple[str, ...] = (),
    *,
    stack_kb: int | None = None,
    memory_mb: int | None = None,
    env: dict[str, str] | None = None,
    log: list[str] | None = None,
    pid: list[int] | None = None,
) -> Iterator[str]:
    """`ember-chat serve` on `model` (with `extra` options), as a user runs it; yields its base URL
    (…/v1) once it says it is serving ("Serving … on http://127.0.0.1:PORT/v1 — Ctrl+C to stop").
    On Linux, `stack_kb` and `memory_mb` limit its stacks (glibc gives each thread the process's
    stack limit: 1 MB is Windows' default for a thread) and its address space (ulimit -s, -v). `env`:
    its environment (its own data folder); `log`: where its stderr lines are kept; `pid`: where its
    process id is put (the server's own: the limits' shell execs it), e.g. to read its memory."""
    command = [
        ember_chat(), "serve", "--model", str(model), "--port", "0",
        "--ctx", str(n_ctx), "--threads", str(threads), *extra,
    ]  # fmt: skip
    limits = [] if stack_kb is None else [f"ulimit -s {stack_kb}"]
    limits += [] if memory_mb is None else [f"ulimit -v {memory_mb * 1024}"]
    if limits and sys.platform == "linux":
        command = ["/bin/sh", "-c", " && ".join([*limits, 'exec "$@"']), "sh", *command]
    with _serving(command, r"Serving .* on (http://\S+/v1)", timeout_s, env, log, pid) as match:
        yield match.group(1)
