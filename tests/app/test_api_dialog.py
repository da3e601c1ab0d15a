"""Settings ▸ Local API server… as a new user tries it (issue 16, item 18): the log shows every
request the server answered (GETs, 404s, 401s; a generation once, with its metrics), the address
can be copied and a curl command tried, and quitting while the server runs asks first."""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable

import httpx2
import openai
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

from ember_chat.app.server.api_control import LOG_LENGTH
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.serve.request_log import HttpExchange
from tests.helpers.api_dialog import WAIT_MS, start_server
from tests.helpers.api_support import assert_error
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.window import load
from tests.helpers.window_support import start_api_in_window


def get(url: str, key: str = "") -> int:
    """The status of a GET (errors included)."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        exc.close()
        return int(exc.code)


def log_rows(dialog: object) -> list[tuple[str, ...]]:
    t = dialog.table
    return [tuple(t.item(r, c).text() for c in range(1, t.columnCount())) for r in range(t.rowCount())]


def test_the_log_shows_every_request_and_the_address_can_be_copied_and_tried(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window(lambda _ref: FakeBackend(n_tokens=3))
    load(qtbot, w, "tiny.gguf")
    dialog = w.api.open_dialog()
    assert not dialog.copy_url.isVisible() and dialog.url.text() == "The server is off."
    intro = dialog.intro.text()  # answers together (batched), not one at a time
    assert "answered together" in intro and "Parallel sequences" in intro
    start_server(qtbot, w, key="sesame")
    url = w.api.server.url
    assert dialog.copy_url.isVisible() and dialog.copy_curl.isVisible()
    qtbot.mouseClick(dialog.copy_url, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == url
    qtbot.mouseClick(dialog.copy_curl, Qt.MouseButton.LeftButton)
    command = QGuiApplication.clipboard().text()
    assert command == dialog.curl.text() and command.startswith(f"curl {url}/chat/completions")
    assert "$EMBER_API_KEY" in command and "sesame" not in command  # the secret stays out of the command
    assert get(f"{url}/models") == 401
    assert get(f"{url}/models", "sesame") == 200
    assert get(f"{url}/nope", "sesame") == 404
    assert get(url.removesuffix("/v1") + "/health", "sesame") == 200
    # the copied command works as it stands (the key from the environment)
    assert shutil.which("curl"), "curl is needed to try the example command"
    done = subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "EMBER_API_KEY": "sesame"},
    )
    assert done.returncode == 0 and '"chat.completion"' in done.stdout, done.stderr
    qtbot.waitUntil(lambda: len(log_rows(dialog)) == 5, timeout=WAIT_MS)
    rows = log_rows(dialog)
    assert rows[:4] == [
        ("GET /v1/models (127.0.0.1)", "401 Unauthorized", "—", "—", "—"),
        ("GET /v1/models (127.0.0.1)", "200 OK", "—", "—", "—"),
        ("GET /v1/nope (127.0.0.1)", "404 Not Found", "—", "—", "—"),
        ("GET /health (127.0.0.1)", "200 OK", "—", "—", "—"),
    ]
    label, _result, _ttft, decode, tokens = rows[4]  # the generation: once, with its metrics
    assert label == "POST /v1/chat/completions (127.0.0.1)" and tokens == "3" and decode.endswith("tok/s")
    # a dialog opened later shows the same log
    w.api.dialog.close()
    w.api.dialog = None
    assert log_rows(w.api.open_dialog()) == rows


def test_the_log_keeps_the_order_requests_arrived_in_when_they_are_told_out_of_it(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """Each request is told once answered, from its own connection's thread: one answered just
    before the next arrived can be told after it (seen once in the full suite). The log (the dialog
    open or not) stays in arrival order, and keeps the last LOG_LENGTH."""
    w = make_window(lambda _ref: FakeBackend(n_tokens=3))
    dialog = w.api.open_dialog()
    first, second, third = (HttpExchange(100.0 + i, "GET", f"/v1/r{i}", 200, "127.0.0.1", 0.01) for i in range(3))
    for told in (first, third, second):  # the second is told last
        w.api._on_exchange(told)
    assert [row[0] for row in log_rows(dialog)] == [f"GET /v1/r{i} (127.0.0.1)" for i in range(3)]
    assert w.api.records == [first, second, third]
    dialog.close()
    late = [HttpExchange(200.0 + i, "GET", f"/v1/late{i}", 200, "127.0.0.1", 0.01) for i in range(LOG_LENGTH)]
    for told in late:
        w.api._on_exchange(told)
    assert w.api.records == late  # the oldest let go
    reopened = w.api.open_dialog()
    assert len(log_rows(reopened)) == LOG_LENGTH and log_rows(reopened)[0][0] == "GET /v1/late0 (127.0.0.1)"
    w.api._on_exchange(HttpExchange(300.0, "GET", "/v1/last", 200, "127.0.0.1", 0.01))
    rows = log_rows(reopened)
    assert len(rows) == LOG_LENGTH and rows[0][0] == "GET /v1/late1 (127.0.0.1)"
    assert rows[-1][0] == "GET /v1/last (127.0.0.1)"


def test_quitting_while_the_api_server_runs_asks_first(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window(lambda _ref: FakeBackend(n_tokens=3))
    start_server(qtbot, w)
    url = w.api.server.url
    w.api.dialog.close()
    w.close()  # asked: the window stays, the server serves
    box = w.api.quit_question
    assert box is not None and box.isVisible() and url in box.text()
    assert w.isVisible() and w.api.running
    qtbot.mouseClick(box.button(QMessageBox.StandardButton.Cancel), Qt.MouseButton.LeftButton)
    assert w.isVisible() and w.api.running and w.api.quit_question is None
    assert get(f"{url}/models") == 200
    w.close()  # asked again; this time, quit
    qtbot.mouseClick(w.api.quit_button, Qt.MouseButton.LeftButton)
    assert not w.isVisible() and not w.api.running


def test_at_quit_the_server_stops_telling_the_window_and_is_stopped(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """Connections still answered while the window closes must not signal a window being destroyed, and the
    server's stop ends before the engine is closed (it ran on a thread nobody waited for)."""
    w = make_window(lambda _ref: FakeBackend(n_tokens=3))
    load(qtbot, w)
    start_api_in_window(qtbot, w)
    server = w.api.server
    assert server is not None and server.on_request is not None
    w.api.shutdown()
    assert server.on_request is None and server.preset is None
    assert not any(t.is_alive() for t in w.api._stopping)


def test_the_unknown_field_400_names_the_windows_own_switch_which_works(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """Issue 28, item 15: the window's server answered an unknown field with "start the server with
    --allow-unknown-fields", a flag it does not have. It names the dialog's checkbox, and that works."""
    w = make_window(lambda _ref: FakeBackend(n_tokens=3))
    load(qtbot, w, "tiny.gguf")
    dialog = start_server(qtbot, w)
    url = w.api.server.url
    hello = [{"role": "user", "content": "Hi"}]
    with openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=30) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(
                model="tiny.gguf", messages=hello, max_tokens=2, extra_body={"vendor_noise": 1}
            )
        error = refused.value.body
        assert isinstance(error, dict) and error["code"] == "unknown_field" and error["param"] == "vendor_noise"
        message = error["message"]
        assert "--allow-unknown-fields" not in message
        assert f"“{dialog.ignore_unknown.text()}”" in message and "Settings ▸ Local API server…" in message
    # llama-server's /tokenize (no openai method for it) gives the same advice
    tokenize = httpx2.post(url.removesuffix("/v1") + "/tokenize", json={"content": "Hi", "vendor_noise": 1}, timeout=30)
    assert assert_error(tokenize, 400, "vendor_noise", "unknown_field") == message
    # the advice, followed: the checkbox, Apply, and the same request is answered
    assert not dialog.ignore_unknown.isChecked()
    dialog.ignore_unknown.setChecked(True)
    with qtbot.waitSignal(dialog.applied, timeout=WAIT_MS) as applied:
        dialog.apply()
    assert applied.args == [True] and w.api.running
    assert w.settings_file.load().api_allow_unknown_fields  # kept for the next start
    with openai.OpenAI(base_url=w.api.server.url, api_key="unused", max_retries=0, timeout=30) as client:
        answer = client.chat.completions.create(
            model="tiny.gguf", messages=hello, max_tokens=2, extra_body={"vendor_noise": 1}
        )
        assert answer.choices[0].finish_reason in ("stop", "length")
