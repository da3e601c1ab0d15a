"""bench/api.py's server processes: Ember's server runs with data and settings folders of its own (no user
preset or saved cache plays a part; removed when it is closed), and a server that exits before it says it
is ready is an error that shows its log (not a server taken for ready)."""

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
