"""bench/api.py's server processes: Ember's server runs with data and settings folders of its own (no user
preset or saved cache plays a part; removed when it is closed), and a server that exits before it says it
is ready is an error that shows its log (not a server taken for ready); --before runs another checkout's server
beside this one's and compares them."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from bench import api
from tests.helpers.gguf_factory import write_tiny_model


def test_embers_server_has_folders_of_its_own_removed_at_close(tmp_path: Path) -> None:
    model = write_tiny_model(tmp_path / "tiny.gguf")
    server = api.ServerProcess.ember(model, 1, 1024, ["--no-kv-snapshots"])
    client = openai.OpenAI(base_url=server.url, api_key="bench", max_retries=0)
    try:
        assert server.home is not None
        home = Path(server.home.name)
        assert home.is_dir() and server.started
        stream = api.stream_completion(client, model.name, "hello", 4, extra={"ignore_eos": True})
        assert stream.finish == "length" and stream.text
    finally:
        client.close()
        server.close()
    assert not home.exists() and server.proc.returncode is not None


def test_a_server_that_exits_before_it_is_ready_is_an_error_with_its_log(tmp_path: Path) -> None:
    model = write_tiny_model(tmp_path / "tiny.gguf")
    with pytest.raises(RuntimeError, match=r"did not start[\s\S]*--no-such-flag"):
        api.ServerProcess.ember(model, 1, 1024, ["--no-such-flag"])


def test_before_runs_the_server_of_another_checkout(tmp_path: Path) -> None:
    """--before: the second Ember server runs that checkout's code, not this one's (its packages first)."""
    main = tmp_path / "checkout" / "engine" / "ember_chat" / "engine" / "cli" / "main.py"
    main.parent.mkdir(parents=True)
    for package in (main.parent, main.parent.parent):
        (package / "__init__.py").write_text("")
    main.write_text("import sys, time\nprint('Serving from', __file__, file=sys.stderr, flush=True)\ntime.sleep(60)\n")
    server = api.ServerProcess.ember(tmp_path / "unused.gguf", 1, 1024, code=tmp_path / "checkout")
    try:
        assert server.started and str(main) in "".join(server.log)
    finally:
        server.close()


def test_before_figures_compare_the_two_servers() -> None:
    args = api.parse_args(["--quick"])
    rows = {
        "direct": [{"ttft_ms": 100.0, "decode_tps": 50.0}],
        "ember": [{"ttft_ms": 104.0, "decode_tps": 49.0}],
        "ember_before": [{"ttft_ms": 101.0, "decode_tps": 49.5}],
    }
    result = api.figures(args, "m", rows, {})
    assert result["move_decode_ratio"] == round(49.0 / 49.5, 4)
    assert result["move_ttft_ms"] == 3.0
    assert result["before_decode_ratio"] == round(49.5 / 50.0, 4) and result["before_ttft_overhead_ms"] == 1.0
    assert api.figures(args, "m", {k: v for k, v in rows.items() if k != "ember_before"}, {})["move_ttft_ms"] is None
