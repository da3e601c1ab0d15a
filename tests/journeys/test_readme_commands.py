"""Every `ember-chat` command the README writes reaches the command line's own parser through the installed
launcher (`.venv/bin/ember-chat`), as a user types it. `ember-chat chats list` once opened the window's
parser ("unrecognized arguments: chats list", exit 2) because the launcher kept a list of its own."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers.entry_point import ember_chat

ROOT = Path(__file__).resolve().parents[2]
_WORD = re.compile(r"[a-z][a-z-]*")


def readme_commands() -> list[tuple[str, ...]]:
    """Each command and subcommand the README names (`chats export`, `remote add`, `run`…), from its
    code blocks and inline code: the words after `ember-chat` up to the first option or placeholder;
    `add|list|test|rm` names four."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found: set[tuple[str, ...]] = set()
    for line in re.findall(r"ember-chat ([^`\n]+)", text):
        words = line.split()
        if not words or not _WORD.fullmatch(words[0]):
            continue  # `ember-chat --model starter`: the window
        command = words[0]
        subs = words[1].split("|") if len(words) > 1 else []
        subs = [s for s in subs if _WORD.fullmatch(s)]
        if command in {"models", "remote", "chats", "projects"} and subs:
            found.update((command, sub) for sub in subs)
        else:
            found.add((command,))
    return sorted(found)


def _ran(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EMBER_DATA_DIR": str(tmp_path / "data"), "EMBER_CONFIG_DIR": str(tmp_path / "config")}
    return subprocess.run([ember_chat(), *args], capture_output=True, text=True, env=env, timeout=120)


def test_the_readme_names_the_commands_it_should() -> None:
    commands = readme_commands()
    for expected in [("chats", "list"), ("chats", "backup"), ("models", "download"), ("remote", "test"),
                     ("run",), ("serve",), ("inspect",), ("bench",), ("transcribe",), ("projects", "new"),
                     ("projects", "add"), ("projects", "list"), ("projects", "index")]:  # fmt: skip
        assert expected in commands
    assert all(
        c[0] in {"run", "serve", "inspect", "bench", "models", "remote", "chats", "transcribe", "projects"}
        for c in commands
    ), commands


@pytest.mark.slow
@pytest.mark.parametrize("command", readme_commands(), ids=" ".join)
def test_every_readme_command_reaches_its_parser(command: tuple[str, ...], tmp_path: Path) -> None:
    done = _ran(*command, "--help", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: ember-chat {' '.join(command)}"), done.stdout[:200]


def test_a_mistyped_command_names_the_real_ones(tmp_path: Path) -> None:
    done = _ran("chat", "list", tmp_path=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert "invalid choice: 'chat'" in done.stderr and "chats" in done.stderr
