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
    storage > models > core), app layers (shell > its parts > Qt plumbing > style), the app's features
    independent of each other but for the imports named, and an engine that never imports the app or Qt.
    A cycle between two layers breaks the contract."""
    lint = Path(sys.executable).parent / "lint-imports"
    out = subprocess.run([str(lint), "--no-cache"], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parent.parent)  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-1000:]
    assert "0 broken" in out.stdout


def _import_cycles() -> tuple[list[list[str]], list[list[str]]]:
    """(module cycles, package cycles): the strongly connected parts of the import graph of Ember's
    modules, and of its packages (ember_chat.engine.storage, ember_chat.app.transcript, …), as import-linter's
    graph library reads them (imports under TYPE_CHECKING count: a reader follows them too)."""
    import grimp

    graph = grimp.build_graph("ember_chat.engine", "ember_chat.app", include_external_packages=False)
    modules = sorted(graph.modules)
    edges = {m: graph.find_modules_directly_imported_by(m) for m in modules}

    def package(module: str) -> str:
        return ".".join(module.split(".")[:3])

    package_edges: dict[str, set[str]] = {}
    for m, targets in edges.items():
        for t in targets:
            if package(m) != package(t):
                package_edges.setdefault(package(m), set()).add(package(t))
    return _cycles(modules, edges), _cycles(sorted({package(m) for m in modules}), package_edges)


def _cycles(nodes: list[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one node, each sorted (iterative: the graph is deep)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    part.append(top)
                    if top == node:
                        break
                if len(part) > 1:
                    found.append(sorted(part))
    return sorted(found)


# No module cycle in the engine nor in the app (the window's were broken as it moved into feature
# packages, issue 29: keep it so), and no package imports back into a package that imports it.
def test_no_import_cycles_between_packages_nor_among_the_modules() -> None:
    modules, packages = _import_cycles()
    assert packages == []
    assert [c for c in modules if c[0].startswith("ember_chat.engine.")] == []
    assert [c for c in modules if c[0].startswith("ember_chat.app.")] == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(["a", "b", "c", "d"], edges) == [["a", "b", "c"]]


APP = ENGINE.parent.parent.parent / "app" / "ember_chat" / "app"
WINDOW_NAMES = ("window", "w")

# Modules under app/ (outside shell/ and main.py) still built from the main window or reading through it
# (issue 29): this list may only shrink, never grow.
WINDOW_BACK_REFERENCES_LEFT = []


def _window_back_references(source: str) -> list[str]:
    """Where a module takes or types the main window: a constructor parameter named window/w, anything
    annotated with MainWindow, `window: Any` (a parameter or an attribute), or a read through
    `self.w.…` / `self.window.…` (Qt's own `self.window()` is a call, not counted)."""
    found: list[str] = []

    def loosely_typed(name: str, note: str) -> bool:
        return name in WINDOW_NAMES and note in ("Any", "typing.Any", "'Any'", '"Any"')

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
                note = ast.unparse(arg.annotation) if arg.annotation is not None else ""
                if node.name == "__init__" and arg.arg in WINDOW_NAMES:
                    found.append(f"line {node.lineno}: {node.name} takes `{arg.arg}`")
                elif "MainWindow" in note or loosely_typed(arg.arg, note):
                    found.append(f"line {node.lineno}: {node.name}'s `{arg.arg}: {note}`")
        elif isinstance(node, ast.AnnAssign):
            target = node.target
            name = (
                target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else ""
            )
            note = ast.unparse(node.annotation)
            if "MainWindow" in note or loosely_typed(name, note):
                found.append(f"line {node.lineno}: `{name}: {note}`")
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id == "self"
            and node.value.attr in WINDOW_NAMES
        ):
            found.append(f"line {node.lineno}: reads `self.{node.value.attr}.{node.attr}`")
    return found


def test_no_feature_takes_or_types_the_main_window() -> None:
    """A feature is built from the AppContext and the widgets it drives, never the main window: only the
    shell (the window's frame and composition) and main.py (which makes the window) may hold it."""
    offenders: dict[str, list[str]] = {}
    for path in sorted(APP.rglob("*.py")):
        module = path.relative_to(APP).as_posix()
        if module.startswith("shell/") or module == "main.py":
            continue
        found = _window_back_references(path.read_text())
        if found:
            offenders[module] = found
    assert {m: f for m, f in offenders.items() if m not in WINDOW_BACK_REFERENCES_LEFT} == {}
    assert [m for m in WINDOW_BACK_REFERENCES_LEFT if m not in offenders] == []  # fixed: take it off the list


def test_the_window_reference_finder_finds_each_kind() -> None:
    source = """
class A:
    def __init__(self, window) -> None: ...
class B:
    def __init__(self, w: object) -> None: ...
def c(host: "MainWindow") -> None: ...
def d(window: Any) -> None: ...
class E:
    window: Any
    def f(self) -> None:
        self.w.store.close()
        self.window().show()
class Fine:
    def __init__(self, ctx: AppContext, parent: QWidget) -> None: ...
"""
    found = _window_back_references(source)
    lines = sorted(int(f.split(":")[0].removeprefix("line ")) for f in found)
    assert lines == [3, 5, 6, 7, 9, 11], found  # (not line 12's self.window(), nor Fine)


TESTS = Path(__file__).resolve().parent


def _test_module_coupling(source: str) -> list[str]:
    """What ties a module to a test module: an import from a module named test_*, or an `__all__` (a test
    module's only reason for one was to re-export fixtures it imported from another)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.rsplit(".", 1)[-1].startswith("test_"):
                found.append(f"line {node.lineno}: imports from {node.module}")
        elif isinstance(node, ast.Import):
            found += [f"line {node.lineno}: imports {a.name}" for a in node.names if ".test_" in f".{a.name}"]
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                found.append(f"line {node.lineno}: defines __all__")
    return found


def test_no_test_module_imports_another_nor_re_exports_fixtures() -> None:
    """Fixtures shared between test modules live in a conftest.py (tests/, tests/app/, tests/engine/), the
    helpers they share in tests/helpers/: a test module is never imported, so none needs an __all__."""
    offenders = {}
    for path in sorted(TESTS.rglob("*.py")):
        found = _test_module_coupling(path.read_text())
        if found:
            offenders[path.relative_to(TESTS).as_posix()] = found
    assert offenders == {}


def test_the_test_module_coupling_finder_finds_each_kind() -> None:
    source = """
from tests.app.test_app import load, paths
import tests.engine.test_runtime
from tests.helpers.window import send
__all__ = ["paths"]
def f() -> None:
    from tests.app.test_chat_list import menu_grab
"""
    assert _test_module_coupling(source) == [
        "line 2: imports from tests.app.test_app",
        "line 3: imports tests.engine.test_runtime",
        "line 5: defines __all__",
        "line 7: imports from tests.app.test_chat_list",
    ]
