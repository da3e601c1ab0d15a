"""Issue 20 on the command line: `ember-chat run` keeps a conversation's KV state in the data folder's
saved conversation caches, as the window does, so the same long prompt run again (a new process) is
restored instead of evaluated, with the same greedy answer; `--no-kv-snapshots` keeps none; `serve`
takes `--parallel N` (and `run` too: they are load flags of the parameter table). Real subprocesses,
a tiny GGUF."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers.entry_point import ember_chat
from tests.helpers.presets_cli import _env, metrics_of, run_cli

LONG = " ".join(["the world is round and the sky is blue, you see."] * 7)


def _answer(out: subprocess.CompletedProcess[str]) -> str:
    return out.stdout.rstrip("\n").rsplit("\n", 1)[0]  # (the last line: the metrics)


def test_run_again_restores_the_prompt_from_the_saved_cache_with_the_same_answer(
    tiny_model: Path, tmp_path: Path
) -> None:
    args = ("--model", str(tiny_model), "--prompt", LONG, "--temperature", "0", "--max-tokens", "8")
    first = run_cli(tmp_path, *args)
    m1 = metrics_of(first)
    assert m1["prompt_tokens"] > 256 and m1["prompt_tokens_restored"] == 0
    saved = list((tmp_path / "data" / "kv-snapshots").glob("*.kvsnap"))
    assert len(saved) == 1  # written before the process ended
    again = run_cli(tmp_path, *args)
    m2 = metrics_of(again)
    assert m2["prompt_tokens"] == m1["prompt_tokens"]
    assert m2["prompt_tokens_restored"] == m2["prompt_tokens_reused"] == m1["prompt_tokens"] - 1  # one evaluated
    assert _answer(again) == _answer(first)  # greedy: token for token the same after the restore


def test_no_kv_snapshots_keeps_none_and_restores_nothing(tiny_model: Path, tmp_path: Path) -> None:
    args = ("--model", str(tiny_model), "--prompt", LONG, "--temperature", "0", "--max-tokens", "4")
    for _ in range(2):
        m = metrics_of(run_cli(tmp_path, *args, "--no-kv-snapshots"))
        assert m["prompt_tokens_restored"] == 0 and m["prompt_tokens_reused"] == 0
    assert not list((tmp_path / "data").glob("kv-snapshots/*"))


def test_serve_and_run_take_parallel_and_no_kv_snapshots(tmp_path: Path) -> None:
    for command in ("serve", "run"):
        out = subprocess.run(
            [ember_chat(), command, "--help"],
            capture_output=True, text=True, env=_env(tmp_path), timeout=60,
        )  # fmt: skip
        assert out.returncode == 0 and "--parallel" in out.stdout and "--no-kv-snapshots" in out.stdout


def test_a_damaged_saved_cache_is_said_on_stderr_and_the_answer_comes_as_usual(
    tiny_model: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "data" / "kv-snapshots"
    folder.mkdir(parents=True)
    damaged = folder / f"{'0' * 40}.kvsnap"
    damaged.write_bytes(b"EMBER-KV" + b"\x00" * 64)  # cut off in the middle of its header
    out = run_cli(tmp_path, "--model", str(tiny_model), "--prompt", LONG, "--temperature", "0", "--max-tokens", "4")
    assert metrics_of(out)["output_tokens"] == 4 and not damaged.exists()
    assert "ember-chat: A saved conversation cache" in out.stderr and "was damaged" in out.stderr


def test_one_engine_side_opener_makes_the_store_and_run_does_not_import_serve(tmp_path: Path) -> None:
    from ember_chat.engine.inference.kv.snapshots import open_snapshot_store
    from ember_chat.engine.storage.paths import KV_SNAPSHOT_FOLDER

    assert open_snapshot_store(tmp_path, 0) is None  # 0: off
    store = open_snapshot_store(tmp_path, 1)
    assert store is not None and store.directory == tmp_path / KV_SNAPSHOT_FOLDER == tmp_path / "kv-snapshots"
    store.close()
    code = (
        "import sys, ember_chat.engine.cli.run; "
        "print('ember_chat.engine.cli.serve' in sys.modules, 'http.server' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["False", "False"]  # `ember-chat run` does not pull in the API server
