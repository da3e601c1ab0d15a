"""Remote connections in `ember-chat serve`'s table, as a user sets them up: `ember-chat remote add` in
an isolated config folder (the API key into the keychain), then `ember-chat serve` in its own process
lists each connection's models as `remote:<connection>/<model id>` beside the installed ones and answers
a chat naming one through Ember (the remote server gets the connection's key; Ember's usage and metrics
count it), while a connection that is down and one that hangs leave the local models listed and served
and hold no request past the connect timeout (said once in serve's log), and one back to serve itself
lists nothing."""

from __future__ import annotations

import time
from pathlib import Path

import httpx2
import openai
import pytest

from ember_chat.engine.inference.pool.remote_catalog import CONNECT_TIMEOUT_S
from tests.helpers.cli_remote import _env, cli
from tests.helpers.gguf_factory import TinySpec, write_tiny_model
from tests.helpers.peer_servers import ember_server, free_port
from tests.helpers.prometheus_text import parse, value
from tests.helpers.sse_server import FakeOpenAI

pytestmark = pytest.mark.slow


def test_serve_lists_and_serves_a_connections_models_beside_the_installed_ones(
    server: FakeOpenAI, hanging_server: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "data" / "models").mkdir(parents=True)
    model = write_tiny_model(tmp_path / "data" / "models" / "alpha.gguf", TinySpec(name="alpha"))
    for name, url, key in (("lab", server.base_url, "lab-secret\n"), ("down", f"http://127.0.0.1:{free_port()}/v1", ""),
                           ("hangs", hanging_server.base_url, "")):  # fmt: skip
        added = cli(tmp_path, "remote", "add", name, url, *(("--api-key-stdin",) if key else ()), stdin=key or None)
        assert added.returncode == 0, added.stderr
    env = _env(tmp_path)  # (its data and config folders; the test keychain, as `remote add` had it)
    log: list[str] = []
    with (
        ember_server(model, threads=1, n_ctx=256, env=env, log=log) as base,
        openai.OpenAI(base_url=base, api_key="unused", max_retries=0) as client,
    ):
        t0 = time.monotonic()
        listed = {m.id: m for m in client.models.list().data}
        # the hanging connection is waited for at most the connect timeout, and only while never listed
        assert time.monotonic() - t0 < CONNECT_TIMEOUT_S + 1.5
        assert next(iter(listed)) == "alpha.gguf" and listed["alpha.gguf"].model_extra["state"] == "loaded"
        remote = listed["remote:lab/test-model"].model_extra
        assert (remote["state"], remote["connection"], remote["memory_bytes"]) == ("remote", "lab", 0)
        assert not any(name.startswith(("remote:down/", "remote:hangs/")) for name in listed)
        t0 = time.monotonic()
        local = client.chat.completions.create(model="alpha.gguf", messages=[{"role": "user", "content": "hi"}],
                                               max_tokens=3, temperature=0)  # fmt: skip
        assert local.choices[0].finish_reason in {"stop", "length"} and time.monotonic() - t0 < 10

        out = client.chat.completions.create(
            model="remote:lab/test-model", messages=[{"role": "user", "content": "hi"}], max_tokens=8
        )
        assert out.model == "remote:lab/test-model" and out.choices[0].message.content == "Hello world"
        assert out.usage is not None and out.usage.completion_tokens > 0
        sent = [r for r in server.requests if r.method == "POST" and r.path.endswith("/chat/completions")]
        assert sent[-1].body["model"] == "test-model"
        assert sent[-1].headers["authorization"] == "Bearer lab-secret"  # (from the keychain)

        rows = {row["name"]: row for row in httpx2.get(base.removesuffix("/v1") + "/api/models").json()["models"]}
        row = rows["remote:lab/test-model"]
        assert (row["state"], row["loaded_by"], row["connection"], row["memory_bytes"]) == ("loaded", "api", "lab", 0)
        assert rows["alpha.gguf"]["connection"] is None

        metrics = parse(httpx2.get(base.removesuffix("/v1") + "/metrics").text)
        assert value(metrics, "ember_output_tokens_total", model="remote:lab/test-model") == out.usage.completion_tokens
        assert value(metrics, "ember_time_to_first_token_seconds_count", model="remote:lab/test-model") == 1
        assert value(metrics, "ember_model_loads_total", model="remote:lab/test-model") == 1

        # a connection back to this very server lists nothing (its models would come back nested)
        assert cli(tmp_path, "remote", "add", "self", base).returncode == 0
        names = [m.id for m in client.models.list().data]
        assert "remote:lab/test-model" in names and not any(n.startswith("remote:self/") for n in names)
        deadline = time.monotonic() + 20
        while not any("the connection self (" in line and "own API server" in line for line in log):
            assert time.monotonic() < deadline, log
            time.sleep(0.05)

    said = [line for line in log if "did not answer" in line]
    assert sum("the connection down (" in line for line in said) == 1
    assert "lab-secret" not in "\n".join(log)
