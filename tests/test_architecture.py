"""The engine never imports Qt: checked on the source and in a fresh interpreter."""

import ast
import subprocess
import sys
from pathlib import Path

ENGINE = Path(__file__).resolve().parent.parent / "engine" / "ember_chat" / "engine"


def test_no_engine_module_imports_qt() -> None:
    offenders = []
    for path in ENGINE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [
                f"{path.name}: {n}"
                for n in names
                if n.split(".")[0] in ("PySide6", "PyQt6") or n.startswith("ember_chat.app")
            ]
    assert offenders == []


def test_importing_every_engine_module_loads_no_qt() -> None:
    modules = sorted(
        ".".join(("ember_chat", "engine", *p.relative_to(ENGINE).with_suffix("").parts)).removesuffix(".__init__")
        for p in ENGINE.rglob("*.py")
    )
    code = f"import sys\nfor m in {modules!r}: __import__(m)\nprint(any(k.startswith('PySide6') for k in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
