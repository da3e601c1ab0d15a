"""docs/examples/tool_loop.py, the README's `openai` tool loop, run as a user runs it: against
`ember-chat serve` on the real Gemma 3 270M (`starter_model`), its first turn a call (a base model: it
does not call tools by itself), the results sent back, and the model's answer in words."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import REPO
from tests.helpers.peer_servers import ember_server

EXAMPLE = REPO / "docs" / "examples" / "tool_loop.py"


def test_the_example_tool_loop_runs_against_ember_chat_serve(starter_model: Path) -> None:
    with ember_server(starter_model, n_ctx=4096) as base_url:
        out = subprocess.run(
            [sys.executable, str(EXAMPLE), "--base-url", base_url, "--first-choice", "required",
             "What is 17.5 times 4?"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert out.returncode == 0, out.stderr
    calls = re.findall(r"^called (multiply|current_time)\((\{.*\})\) -> (.+)$", out.stdout, re.M)
    assert calls, out.stdout  # the forced first turn called a tool, with arguments the script could use
    lines = out.stdout.strip().splitlines()
    assert len(lines) > len(calls)  # and the loop ended with the model's words
