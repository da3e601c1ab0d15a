"""`ember-chat` run with a test folder's environment: a command, its metrics, or its API server for a `with` block."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.helpers.entry_point import ember_chat
from tests.helpers.paths import REPO

ROOT = REPO


def _env(tmp: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "EMBER_DATA_DIR": str(tmp / "data"),
        "EMBER_CONFIG_DIR": str(tmp / "config"),
    }


@contextmanager
def serving(tmp: Path, *args: str) -> Iterator[tuple[str, str]]:
    """`ember-chat serve ARGS` as a user runs it: (base URL, its "Serving …" line); stopped and waited for."""
    command = [ember_chat(), "serve", "--port", "0", "--ctx", "512",
               "--threads", "1", *args]  # fmt: skip
    proc = subprocess.Popen(command, env=_env(tmp), stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "Serving" in line:
                ready.set()
        ready.set()  # ended

    reader = threading.Thread(target=read, name="serve-log")
    reader.start()
    try:
        assert ready.wait(120), "serve did not start"
        match = next((re.search(r"on (http://\S+/v1)", line) for line in lines if "Serving" in line), None)
        assert match, "".join(lines)
        yield match.group(1), next(line for line in lines if "Serving" in line)
    finally:
        proc.terminate()
        try:
            assert proc.wait(timeout=30) == 0, "".join(lines)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            reader.join()
            proc.stderr.close()


def run_cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ember_chat(), "run", "--ctx", "512", "--threads", "1", "--json", *args],
        capture_output=True,
        text=True,
        env=_env(tmp),
        timeout=300,
    )


def metrics_of(out: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout.rstrip("\n").split("\n")[-1]))
