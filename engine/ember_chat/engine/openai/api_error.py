"""OpenAI's error body, both ways: the error Ember's API server answers with (`ApiError`), and the
server's own words read from the error body another server sent (`error_detail`)."""

from __future__ import annotations

import json
from typing import Any

from ember_chat.engine.openai.wire_shape import Shape

# what a client whose conversation does not fit the context can do about it
TRIM_HINT = (
    ' Shorten it, or send "ember": {"trim_history": true} to let Ember leave the oldest messages out as its '
    "window does."
)


class ErrorObject(Shape):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorBody(Shape):
    """OpenAI's error body."""

    error: ErrorObject


class ApiError(Exception):
    """An error the server answers with, in OpenAI's error shape."""

    def __init__(
        self,
        status: int,
        message: str,
        type_: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        error = ErrorObject(message=self.message, type=self.type, param=self.param, code=self.code)
        return ErrorBody(error=error).dump()


def error_detail(body: bytes) -> str:
    """The server's own words from an error body: OpenAI JSON, FastAPI `detail`, or plain text."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return " ".join(text.split())[:300] or "no details"
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data.get("message")))
        if isinstance(err, dict):
            err = err.get("message") or err.get("msg") or json.dumps(err)
        if isinstance(err, list) and err and isinstance(err[0], dict):
            err = err[0].get("msg", json.dumps(err[0]))
        if err:
            return str(err)[:300]
    return text[:300]
