"""Real OpenAI-compatible peers started on 127.0.0.1 for tests and benchmarks, each in its own process:
llama-cpp-python's own server (`python -m llama_cpp.server`), ready when uvicorn says so on stderr,
and Ember's (`ember-chat serve`), ready when it says it is serving (no polling)."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
    flags); yields its base URL (…/v1). Stopped and reaped at exit."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
         "--n_ctx", str(n_ctx), "--n_threads", str(threads), "--n_threads_batch", str(threads),
         "--interrupt_requests", "false", "--verbose", "false", *(["--model_alias", alias] if alias else []), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    ready = threading.Event()
    log: list[str] = []

    def read_log() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line)
            if "Uvicorn running on" in line:
                ready.set()
        ready.set()  # the process ended: stop waiting

    reader = threading.Thread(target=read_log, name="llama-cpp-server-log", daemon=True)
    reader.start()
    try:
        if not ready.wait(timeout_s) or proc.poll() is not None:
            raise RuntimeError("llama_cpp.server did not start:\n" + "".join(log[-20:]))
        yield f"http://127.0.0.1:{port}/v1"
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
def ember_server(model: Path, threads: int = 2, n_ctx: int = 1024, timeout_s: float = 120) -> Iterator[str]:
    """`ember-chat serve` on `model` in its own process, as a user runs it; yields its base URL (…/v1)
    once it says it is serving. Stopped (Ctrl+C's signal) and reaped at exit."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ember_chat.engine.cli.main", "serve", "--model", str(model), "--port", "0",
         "--ctx", str(n_ctx), "--threads", str(threads)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    try:
        line = proc.stderr.readline()  # "Serving … on http://127.0.0.1:PORT/v1 — Ctrl+C to stop"
        match = re.search(r"on (http://\S+/v1)", line)
        if match is None:
            raise RuntimeError("ember-chat serve did not start:\n" + line + proc.stderr.read())
        yield match.group(1)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stderr.close()
