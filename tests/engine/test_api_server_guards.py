"""Ember's OpenAI-compatible API server's safety guards, driven by the official `openai` client and raw
HTTP: the API key, the Host header, CORS (none by default, an allowed origin), the body size limit, an
unsafe binding and a port in use. Shapes, streaming and validation: engine/test_api_server.py."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx2
import openai
import pytest

from ember_chat.engine.errors import ServeError
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.server import ApiServer
from tests.helpers.api_support import MESSAGES, WAIT_S, assert_api_error, assert_error, chat_body, raw_request


def test_api_key(tiny_service: EngineService, serve: Callable[[EngineService, ServerConfig], ApiServer]) -> None:
    server = serve(tiny_service, ServerConfig(port=0, api_key="sekret"))
    assert "sekret" not in repr(server.config)
    with openai.OpenAI(base_url=server.url, api_key="wrong", max_retries=0, timeout=WAIT_S) as client:
        with pytest.raises(openai.AuthenticationError) as info:
            client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=2)
        assert_api_error(info.value, 401)
        with pytest.raises(openai.AuthenticationError):
            client.models.list()
    with httpx2.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=WAIT_S) as http:
        assert_error(http.get("/v1/models"), 401, code="invalid_api_key")
        for _ in range(5):
            response = http.post("/v1/chat/completions", json=chat_body())
            assert_error(response, 401, code="invalid_api_key")
            assert response.headers["connection"] == "close"
        assert_error(http.get("/v1/models", headers={"Authorization": "Basic sekret"}), 401)
    with openai.OpenAI(base_url=server.url, api_key="sekret", max_retries=0, timeout=WAIT_S) as client:
        assert [m.id for m in client.models.list().data] == ["tiny"]
        response = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=2, temperature=0)
        assert response.choices[0].finish_reason == "length"


def test_host_header_is_checked(tiny_server: ApiServer) -> None:
    port = tiny_server.port
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1:{port + 1}", f"attacker.localhost:{port}"):
        status, _, body = raw_request(port, "GET", "/health", {"Host": host})
        assert status == 403, host
        assert json.loads(body)["error"]["type"] == "forbidden"
    status, _, _ = raw_request(port, "POST", "/v1/models", {"Host": f"evil.example:{port}", "Content-Length": "0"})
    assert status == 403
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost", f"LOCALHOST:{port}"):
        status, _, body = raw_request(port, "GET", "/health", {"Host": host})
        assert status == 200, host
        assert json.loads(body)["status"] == "ok"


def test_no_cors_by_default(tiny_server: ApiServer, http: httpx2.Client) -> None:
    response = http.get("/health")
    assert response.status_code == 200
    assert not [h for h in response.headers if h.lower().startswith("access-control-")]
    response = http.post("/v1/chat/completions", json=chat_body(), headers={"Origin": "http://evil.example"})
    assert_error(response, 403)
    assert "access-control-allow-origin" not in response.headers
    assert_error(http.get("/v1/models", headers={"Origin": "http://evil.example"}), 403)
    preflight = http.options(
        "/v1/chat/completions",
        headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"},
    )
    assert_error(preflight, 403)
    assert "access-control-allow-origin" not in preflight.headers


def test_cors_for_allowed_origin(
    tiny_service: EngineService, serve: Callable[[EngineService, ServerConfig], ApiServer]
) -> None:
    origin = "http://app.local"
    server = serve(tiny_service, ServerConfig(port=0, allowed_origins=(origin,)))
    with httpx2.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=WAIT_S) as http:
        preflight = http.options(
            "/v1/chat/completions",
            headers={
                "Origin": origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, content-type",
            },
        )
        assert preflight.status_code == 204
        assert preflight.headers["access-control-allow-origin"] == origin
        assert "POST" in preflight.headers["access-control-allow-methods"]
        assert "content-type" in preflight.headers["access-control-allow-headers"].lower()

        response = http.post("/v1/chat/completions", json=chat_body(), headers={"Origin": origin})
        assert response.status_code == 200
        assert response.headers["access-control-allow-origin"] == origin
        with http.stream(
            "POST", "/v1/chat/completions", json=chat_body(stream=True), headers={"Origin": origin}
        ) as stream:
            assert stream.status_code == 200
            assert stream.headers["access-control-allow-origin"] == origin
            stream.read()
        # another origin is still refused; no origin (a non-browser client) gets no CORS headers
        assert_error(http.get("/v1/models", headers={"Origin": "http://other.local"}), 403)
        plain = http.get("/v1/models")
        assert plain.status_code == 200
        assert "access-control-allow-origin" not in plain.headers


def test_body_size_limit(
    tiny_service: EngineService, serve: Callable[[EngineService, ServerConfig], ApiServer]
) -> None:
    server = serve(tiny_service, ServerConfig(port=0, max_body_bytes=1000))
    with httpx2.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=WAIT_S) as http:
        big = {"model": "tiny", "messages": [{"role": "user", "content": "x" * 2000}], "max_tokens": 2}
        for _ in range(5):  # the client must see the close, never reuse the connection and fail
            response = http.post("/v1/chat/completions", json=big)
            message = assert_error(response, 413)
            assert "1,000 bytes" in message
            assert response.headers["connection"] == "close"
        # a body of megabytes over the limit: read and dropped before the 413, so that the close does not
        # reset the connection under the answer ("peer closed connection without sending complete message body")
        large = {"model": "tiny", "messages": [{"role": "user", "content": "x" * 3_000_000}], "max_tokens": 2}
        for _ in range(5):
            assert "1,000 bytes" in assert_error(http.post("/v1/chat/completions", json=large), 413)
        assert http.post("/v1/chat/completions", json=chat_body(max_tokens=2)).status_code == 200


def test_unsafe_binding_and_port_in_use(tiny_service: EngineService, tiny_server: ApiServer) -> None:
    with pytest.raises(ServeError, match="API key"):
        ServerConfig(host="0.0.0.0").check()
    ServerConfig(host="0.0.0.0", api_key="k").check()
    ServerConfig(host="localhost").check()

    exposed = ApiServer(tiny_service, ServerConfig(host="0.0.0.0", port=0))
    with pytest.raises(ServeError, match="API key"):
        exposed.start()
    assert not exposed.running

    busy = ApiServer(tiny_service, ServerConfig(port=tiny_server.port))
    with pytest.raises(ServeError, match=rf"127\.0\.0\.1:{tiny_server.port}.*another program"):
        busy.start()
    assert not busy.running
    busy.stop()  # harmless when it never started
