"""What the serving lab loads: any OpenAI-compatible server by its URL (llama-server, vLLM, SGLang,
trtllm-serve, Ollama, LM Studio, Ember's own), a saved connection by its name (its key from the OS
keychain), or `local:MODEL` — the model loaded here in Ember's engine, served by Ember's API server in
this process on a free loopback port for the run's length (cli/bench_serve.py; the figures then include
Ember's HTTP layer, as every client of Ember sees it).

The model a request names is the one asked for, else the first the server lists at /v1/models."""

from __future__ import annotations

import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx2

from ember_chat.engine.bench.serving.model_facts import remote_facts
from ember_chat.engine.errors import EmberError

if TYPE_CHECKING:
    from ember_chat.engine.storage.connections import ConnectionStore

LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass
class ServingTarget:
    name: str  # as the user named it
    base_url: str  # …/v1
    model: str
    api_key: str | None = field(default=None, repr=False)
    engine: str = "OpenAI-compatible server"
    on_close: Callable[[], None] | None = field(default=None, repr=False)  # (a server started for the run)
    facts: dict[str, object] = field(default_factory=dict)  # (model_facts: the file, its hash, quant, …)

    @property
    def on_this_machine(self) -> bool:
        """Its hardware is this machine's (a loopback address): the context names this CPU."""
        return (urlsplit(self.base_url).hostname or "") in LOOPBACK

    def context(self) -> dict[str, object]:
        facts: dict[str, object] = {"target": self.name, "base_url": self.base_url, "model": self.model}
        facts["engine"] = self.engine
        if self.on_this_machine:
            facts["hardware"] = _this_machine()
        return {**facts, **self.facts}

    def close(self) -> None:
        if self.on_close is not None:
            self.on_close()
            self.on_close = None


def _this_machine() -> str:
    import os

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} logical cores, {platform.system()}"


def _v1(url: str) -> str:
    url = url.rstrip("/")
    return url if url.endswith("/v1") else f"{url}/v1"


def served_model(base_url: str, api_key: str | None, asked: str | None) -> tuple[str, str]:
    """(the model to name, the engine it says it is) from GET /v1/models; a server that is down or does
    not answer as an OpenAI-compatible one: EmberError naming what happened."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        reply = httpx2.get(f"{base_url}/models", headers=headers, timeout=10.0)
    except httpx2.HTTPError as exc:
        raise EmberError(f"{base_url} does not answer: {exc.__class__.__name__}: {exc}") from None
    if reply.status_code != 200:
        raise EmberError(f"{base_url}/models answered HTTP {reply.status_code}: {reply.text[:160]}")
    try:
        data = reply.json().get("data")
        ids = [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
        owner = next((m.get("owned_by") for m in data if isinstance(m, dict) and m.get("owned_by")), None)
    except (ValueError, AttributeError, TypeError):
        raise EmberError(f"{base_url}/models is not an OpenAI model list: {reply.text[:160]}") from None
    if asked is not None:
        return asked, str(owner or "OpenAI-compatible server")
    if not ids:
        raise EmberError(f"{base_url} serves no model (its /models list is empty): name one with --model.")
    return ids[0], str(owner or "OpenAI-compatible server")


def started_target(
    name: str,
    base_url: str,
    api_key: str | None,
    engine: str,
    on_close: Callable[[], None],
    facts: dict[str, object] | None = None,
) -> ServingTarget:
    """A target for a server started for the run (`on_close` stops it), naming the model it serves;
    a server that cannot say is stopped before the error is raised. `facts`: model_facts.local_facts."""
    target = ServingTarget(name, base_url, "", api_key, engine, on_close, facts or {})
    try:
        target.model, _ = served_model(base_url, api_key, None)
    except BaseException:
        target.close()
        raise
    return target


def url_target(url: str, model: str | None = None, api_key: str | None = None) -> ServingTarget:
    if urlsplit(url).scheme not in ("http", "https"):
        raise EmberError(f"A target URL starts with http:// or https://, got {url!r}.")
    base = _v1(url)
    name, engine = served_model(base, api_key, model)
    return ServingTarget(url, base, name, api_key, engine, facts=remote_facts(base, name, api_key))


def connection_target(store: ConnectionStore, name: str, model: str | None = None) -> ServingTarget:
    endpoint = store.endpoint(name)  # (EmberError saying there is no connection of that name)
    base = _v1(endpoint.base_url)
    served, engine = served_model(base, endpoint.api_key, model)
    facts = remote_facts(base, served, endpoint.api_key)
    return ServingTarget(name, base, served, endpoint.api_key, engine, facts=facts)


# Where servers usually listen on a desktop, and what usually listens there (Ember's own port is the
# serve layer's, which bench may not import: the caller adds it, as cli/bench_serve.py does).
USUAL_PORTS: dict[int, str] = {
    8080: "llama-server",
    8000: "vLLM or SGLang",
    11434: "Ollama",
    1234: "LM Studio",
    30000: "SGLang",
}


@dataclass(frozen=True)
class FoundServer:
    port: int
    base_url: str
    usually: str  # what usually listens on this port ("" for a port asked for)
    models: tuple[str, ...]
    engine: str | None  # the models' owned_by, when the server says
    needs_key: bool = False


def _probe(port: int, usually: str, timeout_s: float) -> FoundServer | None:
    base = f"http://127.0.0.1:{port}/v1"  # (loopback only: never a probe beyond this machine)
    try:
        reply = httpx2.get(f"{base}/models", timeout=timeout_s)
    except httpx2.HTTPError:
        return None
    if reply.status_code in (401, 403):  # (an OpenAI-compatible server that wants a key: it is there)
        return FoundServer(port, base, usually, (), None, needs_key=True)
    if reply.status_code != 200:
        return None
    try:
        data = reply.json().get("data")
        models = tuple(m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str))
        owner = next((str(m["owned_by"]) for m in data if isinstance(m, dict) and m.get("owned_by")), None)
    except (ValueError, AttributeError, TypeError, KeyError):
        return None  # (something else listens there: not a model server)
    return FoundServer(port, base, usually, models, owner)


def find_servers(ports: dict[int, str] | None = None, timeout_s: float = 1.5) -> list[FoundServer]:
    """The OpenAI-compatible servers answering GET /v1/models on 127.0.0.1 at `ports` (USUAL_PORTS),
    with the models each serves, in the order of the ports; probed at once."""
    from concurrent.futures import ThreadPoolExecutor

    asked = USUAL_PORTS if ports is None else ports
    with ThreadPoolExecutor(max_workers=max(1, len(asked)), thread_name_prefix="ember-find") as pool:
        found = list(pool.map(lambda item: _probe(item[0], item[1], timeout_s), asked.items()))
    return [server for server in found if server is not None]
