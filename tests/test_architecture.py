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


def test_the_layering_holds() -> None:
    """pyproject.toml's import-linter contracts: engine layers (cli > serve | bench > inference >
    storage > models > core), app layers (shell > its parts > Qt plumbing > style), and an engine that
    never imports the app or Qt. A cycle between two layers breaks the contract."""
    lint = Path(sys.executable).parent / "lint-imports"
    out = subprocess.run([str(lint), "--no-cache"], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parent.parent)  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-1000:]
    assert "0 broken" in out.stdout
