"""Many models on demand, against `ember-chat serve` in its own process with a data folder of its own
holding three tiny models: the server's own model first in `/v1/models` with every other installed one
and its state, a request naming another model loading it, a load while another model streams, a
memory budget that makes the least recently used idle model give way, `/api/models` load and unload,
a request's `ttl`, `ember-chat models ps`, and unknown models answered with the names that exist."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.inference.pool.memory import footprint
from tests.helpers.entry_point import ember_chat
from tests.helpers.gguf_factory import TinySpec, write_tiny_model
from tests.helpers.peer_servers import ember_server
from tests.helpers.prometheus_text import parse, value

pytestmark = pytest.mark.slow
N_CTX = 256


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hub")
    (root / "data" / "models").mkdir(parents=True)
    (root / "config").mkdir()
    for i, name in enumerate(("alpha", "beta", "gamma")):
        write_tiny_model(root / "data" / "models" / f"{name}.gguf", TinySpec(seed=i, name=name))
    return root


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[tuple[str, list[str]]]:
    one = footprint(LoadConfig(home / "data" / "models" / "alpha.gguf", n_ctx=N_CTX)).ram_bytes
    env = {**os.environ, "EMBER_DATA_DIR": str(home / "data"), "EMBER_CONFIG_DIR": str(home / "config")}
    log: list[str] = []
    # room for two of the tiny models, not three: the third makes the least recently used idle one go
    budget = f"{one * 2.5 / 1e6:.3f}MB"
    with ember_server(home / "data" / "models" / "alpha.gguf", threads=1, n_ctx=N_CTX, env=env, log=log,
                      extra=("--memory-budget", budget)) as url:  # fmt: skip
        yield url, log


def table(base: str) -> dict[str, dict[str, Any]]:
    answer = httpx2.get(base.removesuffix("/v1") + "/api/models", timeout=10)
    assert answer.status_code == 200, answer.text
    return {row["name"]: row for row in answer.json()["models"]}


def chat(client: openai.OpenAI, model: str, **extra: Any) -> str:
    out = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=3, temperature=0, extra_body=extra
    )
    assert out.choices[0].finish_reason in {"stop", "length"}
    return out.model


def wait_until(condition: Any, timeout: float = 20.0) -> None:
    """For another process's state, which has no signal here: look again every 50 ms."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the server's models did not change in time"
        time.sleep(0.05)


def test_the_installed_models_loaded_on_demand_within_the_budget(server: tuple[str, list[str]]) -> None:
    base, log = server
    client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0)
    try:
        listed = client.models.list().data
        assert listed[0].id == "alpha.gguf" and listed[0].model_extra["state"] == "loaded"
        states = {m.id: m.model_extra["state"] for m in listed}
        assert states["beta.gguf"] == states["gamma.gguf"] == "not loaded"
        assert chat(client, "alpha.gguf") == "alpha.gguf"  # the server's own model
        assert chat(client, "beta") == "beta.gguf"  # another, by its file stem: loaded for this request
        rows = table(base)
        assert rows["beta.gguf"]["state"] == "loaded" and rows["beta.gguf"]["loaded_by"] == "api"
        assert rows["alpha.gguf"]["loaded_by"] == "serve" and rows["beta.gguf"]["memory_bytes"] > 0
        assert any("loaded beta.gguf (" in line and "for a request" in line for line in log)

        # gamma loads while alpha streams; beta (idle) makes room for it, alpha (pinned, busy) never
        stream = client.chat.completions.create(
            model="alpha.gguf", messages=[{"role": "user", "content": "hi"}], max_tokens=24, temperature=0,
            stream=True,
        )  # fmt: skip
        first = next(iter(stream))
        other: list[str] = []
        loading = threading.Thread(target=lambda: other.append(chat(client, "gamma.gguf")))
        loading.start()
        text = (first.choices[0].delta.content or "" if first.choices else "") + "".join(
            c.choices[0].delta.content or "" for c in stream if c.choices
        )
        loading.join()
        assert other == ["gamma.gguf"] and isinstance(text, str)
        rows = table(base)
        assert (rows["alpha.gguf"]["state"], rows["beta.gguf"]["state"], rows["gamma.gguf"]["state"]) == (
            "loaded", "not loaded", "loaded",
        )  # fmt: skip
        assert any("unloaded beta.gguf (idle, to make room for gamma.gguf)" in line for line in log)

        # /metrics counts each request under the model that answered it, and the pool's loads and evictions
        families = parse(httpx2.get(base.removesuffix("/v1") + "/metrics", timeout=10).text)
        chats = dict(route="/v1/chat/completions", method="POST", code="200")
        assert value(families, "ember_http_requests_total", model="beta.gguf", **chats) == 1
        assert value(families, "ember_http_requests_total", model="gamma.gguf", **chats) == 1
        assert value(families, "ember_model_loads_total", model="gamma.gguf") == 1
        assert value(families, "ember_model_evictions_total", model="beta.gguf") == 1

        with pytest.raises(openai.NotFoundError) as unknown:
            chat(client, "delta")
        assert "'delta' does not exist" in str(unknown.value) and "'beta.gguf'" in str(unknown.value)
    finally:
        client.close()


def test_load_unload_and_a_requests_time_to_live(server: tuple[str, list[str]]) -> None:
    base, _log = server
    api = base.removesuffix("/v1") + "/api/models"
    loaded = httpx2.post(api + "/load", json={"model": "beta", "ttl": 600}, timeout=60)
    assert loaded.status_code == 200, loaded.text
    assert loaded.json()["model"]["state"] == "loaded" and loaded.json()["model"]["ttl_s"] == 600
    busy_own = httpx2.post(api + "/unload", json={"model": "alpha.gguf"}, timeout=10)
    assert busy_own.status_code == 409 and "--model" in busy_own.json()["error"]["message"]
    gone = httpx2.post(api + "/unload", json={"model": "beta"}, timeout=30)
    assert gone.status_code == 200 and table(base)["beta.gguf"]["state"] == "not loaded"
    assert httpx2.post(api + "/unload", json={"model": "nope"}, timeout=10).status_code == 404
    bad = httpx2.post(api + "/load", json={"model": "beta", "colour": "red"}, timeout=10)
    assert bad.status_code == 400 and "colour" in bad.json()["error"]["message"]

    # Ollama's keep_alive on a chat: unloaded as soon as it is idle for that long
    client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0)
    try:
        chat(client, "beta", keep_alive="1s")
        wait_until(lambda: table(base)["beta.gguf"]["state"] == "not loaded")
        with pytest.raises(openai.BadRequestError, match="keep_alive"):
            chat(client, "beta", keep_alive="soon")
    finally:
        client.close()

    ps = subprocess.run([ember_chat(), "models", "ps", "--url", base], capture_output=True, text=True, timeout=60)
    assert ps.returncode == 0, ps.stderr
    lines = ps.stdout.splitlines()
    assert lines[0].split()[:2] == ["NAME", "STATE"]
    assert any(line.split()[:3] == ["alpha.gguf", "loaded", "serve"] for line in lines[1:])
    assert not any(line.startswith("beta.gguf") for line in lines)  # (not loaded: --all lists it)
