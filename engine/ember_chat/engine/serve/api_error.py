"""The error the API server answers with, in OpenAI's error shape."""

from __future__ import annotations

from typing import Any

# what a client whose conversation does not fit the context can do about it
TRIM_HINT = (
    ' Shorten it, or send "ember": {"trim_history": true} to let Ember leave the oldest messages out as its '
    "window does."
)


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
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}
