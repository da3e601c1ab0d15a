"""Ember's API server on a loaded model, with the real `openai` client pointed at it (the content-part
tests: files and images)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import openai

from ember_chat.engine.attachments import DEFAULT_LIMITS, Limits
from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.inference.backend import InferenceBackend
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.file_reading import TURN_WAIT_S
from ember_chat.engine.serve.projects_option import ServedProjects
from ember_chat.engine.serve.server import ApiServer


@contextlib.contextmanager
def served_client(
    config: LoadConfig,
    name: str,
    timeout_s: float,
    limits: Limits = DEFAULT_LIMITS,
    file_turn_wait_s: float = TURN_WAIT_S,
    projects: ServedProjects | None = None,
    backend: InferenceBackend | None = None,
) -> Iterator[openai.OpenAI]:
    """Load `config` as `name`, serve it on 127.0.0.1 (a free port) and yield a client for it; the
    server and the engine are stopped afterwards. `limits`: the server's for a request's files;
    `file_turn_wait_s`: how long a file waits for a free reader before a 503; `projects`: those a
    request's `ember.project` may name; `backend`: the engine's backend (a scripted model) instead of
    the runtime's."""
    service = EngineService() if backend is None else EngineService(backend_factory=lambda ref: backend)
    server = None
    try:
        load_blocking(service, config, name)
        config = ServerConfig(port=0, attachment_limits=limits, file_turn_wait_s=file_turn_wait_s)
        server = ApiServer(service, config, projects=projects)
        server.start()
        with openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=timeout_s) as client:
            yield client
    finally:
        if server is not None:
            server.stop()
        service.close()
