"""The window's surface kept where its parts now act: `load_model = Delegate("models")` makes
`window.load_model` the model actions' own `load_model` (read, and written where the part's
attribute is), so callers and tests keep reaching the window."""

from __future__ import annotations

from typing import Any


class Delegate:
    def __init__(self, part: str, name: str | None = None) -> None:
        """`part`: the window's attribute holding the part; `name`: the part's attribute (by default
        the same name as on the window)."""
        self.part = part
        self.name = name

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = self.name or name

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(getattr(obj, self.part), self.name or "")

    def __set__(self, obj: object, value: Any) -> None:
        setattr(getattr(obj, self.part), self.name or "", value)
