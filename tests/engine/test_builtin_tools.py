"""Ember's built-in tools (engine/tools/builtin*.py) through the ToolProvider seam, as a chat runs them:
the date and time, the calculator (an AST walker: no eval, bounded), and read-only files from the
folders the user picked, on real files in temporary folders (traversal, absolute paths, links out,
a big file, a binary file)."""

from __future__ import annotations

import os
import re
import sys
import time
import traceback
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from ember_chat.engine.core.tools import ToolCall, ToolResult
from ember_chat.engine.tools.builtin import BuiltinTools
from ember_chat.engine.tools.builtin_files import LIST_LIMIT, READ_LIMIT_BYTES
from ember_chat.engine.tools.config import BuiltinToolsConfig


def call(tools: BuiltinTools, name: str, **arguments: object) -> ToolResult:
    result = tools.call(ToolCall("c1", name, dict(arguments)), 5.0)
    assert result.call_id == "c1" and result.name == name
    return result


def calc(expression: object) -> ToolResult:
    return call(BuiltinTools(calculator=True), "calculator", expression=expression)


# ----- what is offered


def test_nothing_is_offered_by_default() -> None:
    tools = BuiltinTools()
    assert tools.source == "Built-in"
    assert tools.list_tools(1.0) == []


def test_each_switch_offers_its_tools(tmp_path: Path) -> None:
    assert [t.name for t in BuiltinTools(datetime=True).list_tools(1.0)] == ["current_datetime"]
    assert [t.name for t in BuiltinTools(calculator=True).list_tools(1.0)] == ["calculator"]
    specs = BuiltinTools(datetime=True, calculator=True, folders=[tmp_path]).list_tools(1.0)
    assert [t.name for t in specs] == ["current_datetime", "calculator", "list_files", "read_file"]
    assert all(t.read_only for t in specs)
    by_name = {t.name: t for t in specs}
    assert by_name["calculator"].parameters["required"] == ["expression"]
    assert by_name["read_file"].parameters["required"] == ["path"]
    assert tmp_path.name in by_name["list_files"].description  # the model is told which folders it may read


def test_from_settings(tmp_path: Path) -> None:
    names = lambda config: [t.name for t in BuiltinTools.from_config(config).list_tools(1.0)]  # noqa: E731
    assert names(BuiltinToolsConfig()) == []
    assert names(BuiltinToolsConfig(datetime=True, calculator=True)) == ["current_datetime", "calculator"]
    # the folders count only while the file tools are on
    assert names(BuiltinToolsConfig(folders=(str(tmp_path),))) == []
    (tmp_path / "a.txt").write_text("hello", encoding="utf-8")
    tools = BuiltinTools.from_config(BuiltinToolsConfig(files=True, folders=(str(tmp_path),)))
    assert [t.name for t in tools.list_tools(1.0)] == ["list_files", "read_file"]
    assert call(tools, "read_file", path="a.txt").content == "hello"
    assert names(BuiltinToolsConfig(files=True)) == []  # no folder picked: nothing to read


def test_a_tool_that_is_off_is_refused_with_a_sentence(tmp_path: Path) -> None:
    result = call(BuiltinTools(calculator=True), "read_file", path="x.txt")
    assert result.is_error and "read_file" in result.content and "not turned on" in result.content
    assert (tmp_path / "x.txt").exists() is False


# ----- date and time


def test_current_datetime_is_now_with_weekday_and_time_zone() -> None:
    before = datetime.now().astimezone().replace(microsecond=0)
    result = call(BuiltinTools(datetime=True), "current_datetime")
    after = datetime.now().astimezone()
    assert not result.is_error
    stamp = datetime.fromisoformat(re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d", result.content)[0])
    assert before <= stamp <= after
    assert stamp.strftime("%A") in result.content
    assert "time zone" in result.content


def test_current_datetime_follows_the_local_time_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    old = os.environ.get("TZ")
    try:
        os.environ["TZ"] = "Asia/Kolkata"
        time.tzset()
        content = call(BuiltinTools(datetime=True), "current_datetime").content
        assert "+05:30" in content
        stamp = datetime.fromisoformat(re.search(r"\d{4}-\d\d-\d\dT\S+\+05:30", content)[0])
        assert stamp.utcoffset() == timedelta(hours=5, minutes=30)
    finally:
        if old is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = old
        time.tzset()


# ----- the calculator


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2 * (3 + 4)", "14"),
        ("7 / 2", "3.5"),
        ("7 // 2", "3"),
        ("-7 % 3", "2"),
        ("2 ** 10", "1024"),
        ("2 ** -2", "0.25"),
        ("-(-3)", "3"),
        ("+4", "4"),
        ("0.1 + 0.2", "0.3"),
        ("sqrt(16) + abs(-2)", "6"),
        ("round(pi, 4)", "3.1416"),
        ("max(1, 5, 3) - min(4, 2)", "3"),
        ("log(e)", "1"),
        ("log(8, 2)", "3"),
        ("factorial(20)", "2432902008176640000"),
        ("2 ** 1000 % 1000", "376"),
        ("1e3 * 2", "2000"),
        ("10 ** 20", "100000000000000000000"),
        ("sin(pi / 2)", "1"),
        ("hypot(3, 4)", "5"),
    ],
)
def test_the_calculator_computes(expression: str, expected: str) -> None:
    result = calc(expression)
    assert not result.is_error, result.content
    assert result.content == expected


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("1 / 0", "divides by zero"),
        ("5 // 0", "divides by zero"),
        ("5 % 0", "divides by zero"),
        ("0 ** -1", "zero"),
        ("9 ** 9 ** 9", "too large"),
        ("2 ** 100000", "too large"),
        ("(10 ** 2000) * (10 ** 2000)", "too large"),
        ("factorial(100000)", "factorial"),
        ("10.0 ** 400", "too large"),
        ("exp(1000)", "too large"),
        ("sqrt(-1)", "sqrt"),
        ("log(0)", "log"),
        ("(-8) ** (1 / 3)", "not a real number"),
        ("2 ^ 10", "**"),
        ("1 << 5", "does not support"),
        ("1 < 2", "does not support"),
        ("x + 1", "'x'"),
        ("__import__('os')", "'__import__'"),
        ("__import__('os').system('true')", "does not support"),
        ("().__class__", "does not support"),
        ("open('/etc/passwd')", "'open'"),
        ("'a' * 3", "numbers"),
        ("True + 1", "numbers"),
        ("1j * 2", "numbers"),
        ("[1, 2]", "does not support"),
        ("lambda: 1", "does not support"),
        ("sqrt(x=4)", "name=value"),
        ("sqrt(1, 2)", "sqrt"),
        ("2 +", "not valid"),
        ("", "expression"),
        ("1" + " + 1" * 600, "characters"),
        ("(1 + " * 150 + "1" + ")" * 150, "deep"),
        ("-" * 300 + "1", "deep"),
    ],
)
def test_the_calculator_refuses_with_a_sentence(expression: str, words: str) -> None:
    started = time.perf_counter()
    result = calc(expression)
    assert time.perf_counter() - started < 1.0  # bounded: a refusal is quick, never a long computation
    assert result.is_error, result.content
    assert words in result.content
    assert result.content.endswith(".")
    assert "Error" not in result.content and "Traceback" not in result.content  # a sentence, not an exception


def test_the_calculator_needs_a_text_expression() -> None:
    result = calc(12)
    assert result.is_error and "expression" in result.content
    missing = call(BuiltinTools(calculator=True), "calculator")
    assert missing.is_error and "expression" in missing.content


def test_the_calculator_never_evaluates_code(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    result = calc(f"__import__('pathlib').Path({str(marker)!r}).touch()")
    assert result.is_error
    assert not marker.exists()


# ----- files from the picked folders


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """A picked folder 'notes' beside a secret file the model must not read."""
    notes = tmp_path / "notes"
    (notes / "sub").mkdir(parents=True)
    (notes / "todo.md").write_text("buy milk\ncall Ada\n", encoding="utf-8")
    (notes / "sub" / "deep.txt").write_text("déjà vu ✓", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("the password is swordfish", encoding="utf-8")
    return notes


def files(*folders: Path) -> BuiltinTools:
    return BuiltinTools(folders=list(folders))


def test_list_files_shows_paths_read_file_takes(shared: Path) -> None:
    tools = files(shared)
    listing = call(tools, "list_files")
    assert not listing.is_error
    assert "notes/todo.md" in listing.content and "notes/sub/" in listing.content
    assert "deep.txt" not in listing.content  # one level unless asked
    deep = call(tools, "list_files", path="notes", recursive=True)
    assert "notes/sub/deep.txt" in deep.content
    assert call(tools, "list_files", path="notes/sub").content.count("deep.txt") == 1
    # paths as the listing writes them, and (one folder) relative to it
    assert call(tools, "read_file", path="notes/todo.md").content == "buy milk\ncall Ada\n"
    assert call(tools, "read_file", path="todo.md").content == "buy milk\ncall Ada\n"
    assert call(tools, "read_file", path="./notes/sub/../sub/deep.txt").content == "déjà vu ✓"


def test_several_folders_are_told_apart(shared: Path, tmp_path: Path) -> None:
    other = tmp_path / "work" / "notes"  # the same folder name: it gets its own label
    other.mkdir(parents=True)
    (other / "plan.txt").write_text("ship it", encoding="utf-8")
    tools = files(shared, other)
    top = call(tools, "list_files").content
    assert "notes/" in top and "notes-2/" in top
    assert call(tools, "read_file", path="notes-2/plan.txt").content == "ship it"
    assert call(tools, "read_file", path="notes/todo.md").content.startswith("buy milk")
    ambiguous = call(tools, "read_file", path="todo.md")
    assert ambiguous.is_error and "notes, notes-2" in ambiguous.content


@pytest.mark.parametrize(
    "path", ["../secret.txt", "notes/../../secret.txt", "notes/sub/../../../secret.txt", "..", "notes/.."]
)
def test_path_traversal_is_refused(shared: Path, path: str) -> None:
    tools = files(shared)
    for name in ("read_file", "list_files"):
        result = call(tools, name, path=path)
        assert result.is_error, (name, result.content)
        assert "swordfish" not in result.content and "secret.txt" not in result.content.split(path)[-1]
        assert "outside" in result.content


def test_absolute_paths_outside_are_refused(shared: Path, tmp_path: Path) -> None:
    tools = files(shared)
    for path in (str(tmp_path / "secret.txt"), "/etc/passwd", str(tmp_path)):
        result = call(tools, "read_file", path=path)
        assert result.is_error and "outside" in result.content
        assert "swordfish" not in result.content and "root:" not in result.content
    # an absolute path that lies inside a picked folder is that file
    assert call(tools, "read_file", path=str(shared / "todo.md")).content.startswith("buy milk")


def test_links_that_lead_outside_are_refused(shared: Path, tmp_path: Path) -> None:
    (shared / "leak.txt").symlink_to(tmp_path / "secret.txt")
    (shared / "escape").symlink_to(tmp_path)
    (shared / "inside.md").symlink_to(shared / "todo.md")
    tools = files(shared)
    for path in ("notes/leak.txt", "notes/escape/secret.txt"):
        result = call(tools, "read_file", path=path)
        assert result.is_error and "outside" in result.content and "swordfish" not in result.content
    assert call(tools, "list_files", path="notes/escape").is_error
    listing = call(tools, "list_files", path="notes", recursive=True).content
    assert "notes/leak.txt" in listing and "outside" in listing  # shown, said unreadable
    assert "secret.txt" not in listing  # the link out is never followed
    assert call(tools, "read_file", path="notes/inside.md").content.startswith("buy milk")  # a link inside is fine


def test_a_big_file_is_cut_with_a_note_and_read_on(shared: Path) -> None:
    line = "0123456789abcdé\n"  # 17 bytes, with a two-byte character
    text = line * (3 * READ_LIMIT_BYTES // len(line.encode()))
    (shared / "big.log").write_text(text, encoding="utf-8")
    tools = files(shared)
    first = call(tools, "read_file", path="notes/big.log")
    assert not first.is_error
    body, note = first.content.split("\n\n[", 1)
    assert len(body.encode()) <= READ_LIMIT_BYTES and text.startswith(body)
    offset = int(re.search(r"offset (\d+)", note)[1])
    assert offset == len(body.encode())
    assert str(len(text.encode())) in note  # the whole size is said
    parts = [body]
    while offset is not None:
        part = call(tools, "read_file", path="notes/big.log", offset=offset).content
        chunk, _, note = part.partition("\n\n[")
        parts.append(chunk)
        found = re.search(r"offset (\d+)", note)
        offset = int(found[1]) if found else None
    assert "".join(parts) == text  # paged through, nothing lost or doubled
    past = call(tools, "read_file", path="notes/big.log", offset=10**9)
    assert past.is_error and "end" in past.content


def test_binary_and_odd_files_are_refused(shared: Path) -> None:
    (shared / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    (shared / "noise.bin").write_bytes(bytes(range(128, 256)) * 20)
    (shared / "empty.txt").write_bytes(b"")
    os.mkfifo(shared / "pipe")
    tools = files(shared)
    for name in ("image.png", "noise.bin"):
        result = call(tools, "read_file", path=f"notes/{name}")
        assert result.is_error and "binary" in result.content
    assert "empty" in call(tools, "read_file", path="notes/empty.txt").content
    pipe = call(tools, "read_file", path="notes/pipe")  # never blocks on a fifo
    assert pipe.is_error and "not a regular file" in pipe.content
    folder = call(tools, "read_file", path="notes/sub")
    assert folder.is_error and "list_files" in folder.content
    missing = call(tools, "read_file", path="notes/nope.txt")
    assert missing.is_error and "does not exist" in missing.content
    assert call(tools, "read_file", path="notes/todo.md", offset=-1).is_error


def test_a_file_with_a_few_bad_bytes_is_read_with_a_note(shared: Path) -> None:
    (shared / "latin.txt").write_bytes("café au lait, ".encode() * 20 + "naïve".encode("latin-1"))
    result = call(BuiltinTools(folders=[shared]), "read_file", path="notes/latin.txt")
    assert not result.is_error
    assert result.content.startswith("café au lait") and "not UTF-8" in result.content


def test_a_long_listing_stops_with_a_note(shared: Path) -> None:
    many = shared / "many"
    many.mkdir()
    for i in range(LIST_LIMIT + 20):
        (many / f"f{i:04}.txt").write_text("x", encoding="utf-8")
    content = call(files(shared), "list_files", path="notes/many").content
    assert content.count(".txt") == LIST_LIMIT
    assert "20 more" in content


def test_a_very_deep_folder_is_listed(shared: Path) -> None:
    """Folders nested deeper than Python may recurse are walked (with a lowered recursion limit, so
    the folder stays shallow enough for the test's own clean-up to remove it)."""
    deep = shared / "deep" / "/".join(["d"] * 150)
    deep.mkdir(parents=True)
    (deep / "bottom.txt").write_text("found", encoding="utf-8")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(traceback.extract_stack()) + 60)
    try:
        result = call(files(shared), "list_files", path="notes/deep", recursive=True)
    finally:
        sys.setrecursionlimit(limit)
    assert not result.is_error, result.content
    assert "/d/bottom.txt (5 bytes)" in result.content  # walked to the bottom
    assert result.content.count("\n") == 151


def test_a_huge_tree_is_not_walked_to_the_end(shared: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ember_chat.engine.tools import builtin_files

    monkeypatch.setattr(builtin_files, "LIST_LIMIT", 5)  # a small limit stands for a home folder's million files
    for i in range(300):
        (shared / f"f{i:03}.txt").write_text("x", encoding="utf-8")
    content = call(files(shared), "list_files", recursive=True).content
    assert content.count(".txt") == 5
    assert "more not shown" in content and not re.search(r"\d+ more", content)  # it stopped counting too


def test_a_binary_file_read_from_an_offset_is_refused(shared: Path) -> None:
    (shared / "mixed.bin").write_bytes(b"\x00\x01\x02" + b"plain text " * 5000)
    result = call(files(shared), "read_file", path="notes/mixed.bin", offset=40_000)
    assert result.is_error and "binary" in result.content


def test_the_tools_only_read(shared: Path) -> None:
    before = {p: p.stat().st_mtime_ns for p in shared.rglob("*")}
    tools = files(shared)
    call(tools, "list_files", recursive=True)
    call(tools, "read_file", path="notes/todo.md")
    assert {p: p.stat().st_mtime_ns for p in shared.rglob("*")} == before


def test_a_folder_that_went_away_says_so(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    tools = files(gone)
    gone.rmdir()
    result = call(tools, "list_files")
    assert result.is_error and "gone" in result.content and "Settings" in result.content


def test_bad_arguments_are_sentences(shared: Path) -> None:
    tools = files(shared)
    assert call(tools, "read_file").is_error
    assert call(tools, "read_file", path=5).is_error
    assert call(tools, "list_files", path="notes", recursive="yes").is_error
    nul = call(tools, "read_file", path="notes/todo.md\x00.png")
    assert nul.is_error and "NUL" in nul.content
    long = call(tools, "read_file", path="notes/" + "x" * 5000)
    assert long.is_error and "unexpectedly" not in long.content
    unknown = call(tools, "rm_rf", path="/")
    assert unknown.is_error and "rm_rf" in unknown.content


def test_the_calculator_says_nothing_on_stderr_for_what_python_only_warns_about() -> None:
    """'1and 2' (a model's sloppy expression): Python warns (SyntaxWarning) before parsing it; the
    calculator's answer is its sentence, not a warning printed on Ember's stderr."""
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = calc("1and 2")
    assert result.is_error and result.content.endswith(".")
    assert not [w for w in seen if issubclass(w.category, SyntaxWarning)]
