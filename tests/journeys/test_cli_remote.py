"""`ember-chat remote …`, `run --remote` and `serve` from a terminal, against real servers on
127.0.0.1: `serve` itself (a subprocess), queried by the `openai` client and by `run --remote`."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.helpers.cli_remote import _env, cli
from tests.helpers.entry_point import ember_chat


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Iterator[tuple[str, Path]]:
    """`ember-chat serve` as a user runs it, with an API key from the environment."""
    tmp = tmp_path_factory.mktemp("serve")
    proc = subprocess.Popen(
        [ember_chat(), "serve", "--model", str(tiny_model), "--port", "0",
         "--api-key-env", "SERVE_KEY", "--ctx", "512", "--threads", "1"],
        env=_env(tmp, SERVE_KEY="serve-secret"),
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    line = proc.stderr.readline()  # "Serving … on http://127.0.0.1:PORT/v1 — Ctrl+C to stop"
    match = re.search(r"on (http://\S+/v1)", line)
    assert match, line + proc.stderr.read() if proc.poll() is not None else line
    yield match.group(1), tmp
    proc.terminate()
    assert proc.wait(timeout=30) == 0
    proc.stderr.close()


def test_serve_answers_the_openai_client(served: tuple[str, Path]) -> None:
    url, _ = served
    with openai.OpenAI(base_url=url, api_key="serve-secret", max_retries=0) as client:
        models = [m.id for m in client.models.list()]  # its own model first, then the others installed
        assert models[0].endswith("tiny-chatml.gguf") and "starter" in models
        out = client.completions.create(model=models[0], prompt="hello", max_tokens=5, temperature=0)
        assert out.choices[0].finish_reason == "length" and out.usage is not None and out.usage.completion_tokens == 5
    with (
        openai.OpenAI(base_url=url, api_key="wrong", max_retries=0) as client,
        pytest.raises(openai.AuthenticationError),
    ):
        client.models.list()


@pytest.mark.slow
def test_remote_add_list_test_run_rm(served: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = served
    add = cli(tmp_path, "remote", "add", "lab", url, "--api-key-stdin", stdin="serve-secret\n")
    assert add.returncode == 0, add.stderr
    assert "serve-secret" not in (tmp_path / "config" / "connections.json").read_text()
    listed = json.loads(cli(tmp_path, "remote", "list", "--json").stdout)
    assert listed == [{"name": "lab", "base_url": url, "default_model": "", "verify_tls": True,
                       "read_timeout_s": 60.0, "api_key": True}]  # fmt: skip
    tested = cli(tmp_path, "remote", "test", "lab", "--json")
    assert tested.returncode == 0, tested.stderr
    report = json.loads(tested.stdout)
    model = report["models"][0]["id"]
    assert report["round_trip_ms"] > 0 and report["models"][0]["n_ctx"] == 512
    run = cli(tmp_path, "run", "--remote", "lab", "--model", model, "--prompt", "Hi", "--max-tokens", "6",
              "--temperature", "0", "--json")  # fmt: skip
    assert run.returncode == 0, run.stderr
    metrics = json.loads(run.stdout.rstrip("\n").split("\n")[-1])
    assert metrics["backend"] == "remote" and metrics["connection"] == "lab" and metrics["output_tokens"] == 6
    assert metrics["token_count"] == "exact" and metrics["threads"] is None and metrics["ttft_s"] > 0
    # the benchmark lab on the connection's model, named as the window names it
    bench = cli(tmp_path, "bench", "--model", f"remote:lab/{model}", "--prompt-lengths", "16,32", "--output", "4",
                "--reps", "1", "--json", "--no-save")  # fmt: skip
    assert bench.returncode == 0, bench.stderr
    result = json.loads(bench.stdout)
    assert result["machine"]["server"] == "lab" and [p["where"] for p in result["points"]] == ["lab", "lab"]
    assert all(p["decode_tokens_per_s"] > 0 and p["peak_rss_bytes"] is None for p in result["points"])
    assert cli(tmp_path, "remote", "rm", "lab").returncode == 0
    assert json.loads(cli(tmp_path, "remote", "list", "--json").stdout) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["remote", "test", "nobody"], "no connection called 'nobody'"),
        (["remote", "add", "x", "ftp://host"], "not an http(s) address"),
        (["run", "--remote", "gone", "--prompt", "x"], "no connection called 'gone'"),
        (["serve", "--model", "starter", "--host", "0.0.0.0"], "set an API key"),
        (["remote", "add", "k", "http://127.0.0.1:9/v1", "--api-key-env", "NO_SUCH_VAR"], "NO_SUCH_VAR"),
    ],
)
def test_remote_mistakes_are_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    out = cli(tmp_path, *args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], out.stderr


def test_unreachable_and_wrong_key_exit_2(served: tuple[str, Path], tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert cli(tmp_path, "remote", "add", "down", f"http://127.0.0.1:{port}/v1", "--model", "m").returncode == 0
    out = cli(tmp_path, "run", "--remote", "down", "--prompt", "x")
    assert out.returncode == 2 and "refused" in out.stderr
    url, _ = served
    assert cli(tmp_path, "remote", "add", "badkey", url, "--api-key-stdin", stdin="nope\n").returncode == 0
    out = cli(tmp_path, "remote", "test", "badkey")
    assert out.returncode == 2 and "refused the API key" in out.stderr
