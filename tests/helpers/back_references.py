"""What a feature of the window may not do (issue 29): take the main window, type anything as it or as
Any, or read through a window — checked on a controller class and on its module's source."""

from __future__ import annotations

import ast
import inspect
import typing
from types import ModuleType

from ember_chat.app.context import AppContext


def assert_built_without_the_window(cls: type, module: ModuleType, *, forbidden: frozenset[str] = frozenset()) -> None:
    """`cls`'s constructor takes the AppContext as `ctx`, no window (`window`, `w`, `main_window` or a name in
    `forbidden`), and types every parameter, none as Any or the MainWindow."""
    parameters = inspect.signature(cls.__init__).parameters
    assert not {"window", "w", "main_window", *forbidden} & set(parameters)
    hints = typing.get_type_hints(cls.__init__, vars(module))
    assert set(hints) == {*parameters} - {"self"} | {"return"}  # every parameter typed
    assert hints["ctx"] is AppContext
    assert all(hint is not typing.Any and "MainWindow" not in repr(hint) for hint in hints.values())


def assert_module_reads_no_window(module: ModuleType, handed_over: str = "") -> None:
    """`module` reads nothing through a `w` or a `window`, names neither Any nor MainWindow, and reads no
    attribute of `handed_over` (the widget its dialogs open over, given to Qt only)."""
    tree = ast.parse(inspect.getsource(module))
    attributes = [node for node in ast.walk(tree) if isinstance(node, ast.Attribute)]
    assert [a.attr for a in attributes if a.attr in ("w", "window")] == []
    if handed_over:
        read = [a.attr for a in attributes if isinstance(a.value, ast.Attribute) and a.value.attr == handed_over]
        assert read == []
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert "Any" not in names and "MainWindow" not in names
