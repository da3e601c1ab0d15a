"""`ember-chat` run for the model library's commands, with the environment a test gives it."""

from __future__ import annotations

import subprocess

from tests.helpers.entry_point import ember_chat


def cli(*args: str, env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ember_chat(), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        input=stdin,
    )
