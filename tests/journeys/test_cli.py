"""`ember-chat` from a terminal: streaming, the JSON metrics line, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember_chat.engine import __version__
from tests.helpers.cli import cli

REQUIRED_KEYS = {
    "ttft_s", "prompt_tokens", "prompt_tokens_reused", "prefill_tokens_per_s", "decode_tokens_per_s",
    "output_tokens", "itl_p50_ms", "itl_p95_ms", "itl_p99_ms", "tpot_ms", "e2e_s", "stop_reason", "n_ctx",
    "context_used", "model", "quantization", "backend", "threads", "gpu_layers",
}  # fmt: skip


def test_version() -> None:
    out = cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"ember-chat {__version__}"


def test_run_tiny_json(tiny_model: Path) -> None:
    out = cli("run", "--model", str(tiny_model), "--prompt", "hello", "--json", "--temperature", "0",
              "--max-tokens", "12", "--ctx", "512", "--threads", "1")  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.rstrip("\n").split("\n")
    metrics = json.loads(lines[-1])
    assert metrics.keys() >= REQUIRED_KEYS
    assert metrics["threads"] == 1 and metrics["n_ctx"] == 512
    assert metrics["model"] == "tiny-chatml.gguf"  # a model given as a file: its name (models/names.py)
    assert metrics["output_tokens"] >= 1 and metrics["stop_reason"] in ("stop", "length")


@pytest.mark.slow
def test_run_gemma_streams_real_text(tmp_path: Path) -> None:
    out = cli("run", "--model", "gemma-3-270m", "--mode", "complete", "--prompt", "The capital of France is",
              "--max-tokens", "16", "--temperature", "0", "--json", data_dir=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    *text, last = out.stdout.rstrip("\n").split("\n")
    metrics = json.loads(last)
    assert "France" in "\n".join(text)  # real, on-topic text from the base model
    assert metrics["model"] == "Gemma 3 270M (base model)" and metrics["quantization"] == "Q4_K_M"
    assert metrics["output_tokens"] == 16 and metrics["stop_reason"] == "length"
    assert metrics["decode_tokens_per_s"] > 0 and metrics["ttft_s"] > 0
    assert (tmp_path / "models" / "gemma-3-270m-q4_k_m.gguf").exists()  # assembled into the models folder


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--model", "/no/such.gguf", "--prompt", "x"], "no such file"),
        (["run", "--model", "MODEL", "--prompt", "x", "--temperature", "9"], "temperature"),
        (["run", "--model", "MODEL", "--prompt", "x", "--max-tokens", "many"], "--max-tokens"),
        (["run", "--model", "BAD", "--prompt", "x"], "not a GGUF"),
        (["run", "--prompt", "x"], "--model"),
        (["run", "--model", "MODEL", "--prompt", "x", "--template", "nope"], "unknown chat template"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tiny_model: Path, tmp_path: Path, args: list[str], message: str) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"\x00" * 100)
    args = [str(tiny_model) if a == "MODEL" else str(bad) if a == "BAD" else a for a in args]
    out = cli(*args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], out.stderr
