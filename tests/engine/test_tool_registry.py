"""The tool registry (engine/tools/registry.py): every source's tools under stable keys
("source/name"), the names offered to the model (a name two sources share is told apart), a source
that cannot be listed costs only itself, and the request a chat's enabled tools make. Sources: the
real BuiltinTools and tests/tool_sources.TextTools (real code, its list read from a file)."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import pytest

from ember_chat.engine.core.tools import ToolSpec
from ember_chat.engine.tools.builtin import BuiltinTools
from ember_chat.engine.tools.registry import ToolRegistry, tool_tokens_estimate
from tests.helpers.tool_sources import TextTools


@pytest.fixture
def builtin() -> BuiltinTools:
    return BuiltinTools(datetime=True, calculator=True)


@pytest.fixture
def text(tmp_path: Path) -> TextTools:
    return TextTools("Text", tmp_path / "text.json").write("calculator", "word_count")


def test_entries_have_stable_keys_and_exposed_names(builtin: BuiltinTools, text: TextTools) -> None:
    registry = ToolRegistry([builtin, text])
    assert registry.entries() == []  # nothing is listed until refresh (it may start servers)
    assert registry.refresh(5.0) == []
    keys = [e.key for e in registry.entries()]
    assert keys == ["Built-in/current_datetime", "Built-in/calculator", "Text/calculator", "Text/word_count"]
    exposed = {e.key: e.spec.name for e in registry.entries()}
    # two sources offer "calculator": each is offered under its own name; the others keep theirs
    assert exposed["Built-in/current_datetime"] == "current_datetime"
    assert exposed["Text/word_count"] == "word_count"
    assert exposed["Built-in/calculator"] == "Built-in_calculator"
    assert exposed["Text/calculator"] == "Text_calculator"
    entry = registry.entry("Text/calculator")
    assert entry is not None and entry.source == "Text" and entry.original_name == "calculator"
    assert entry.provider is text and entry.spec.description == "calculator from Text"
    assert registry.exposed("Built-in_calculator") is registry.entry("Built-in/calculator")
    assert registry.exposed("calculator") is None and registry.entry("Text/nope") is None
    assert registry.entry("Text/word_count").spec.read_only  # kept from the source


def test_keys_stay_when_the_clash_goes(builtin: BuiltinTools, text: TextTools) -> None:
    registry = ToolRegistry([builtin, text])
    registry.refresh(5.0)
    text.write("word_count")
    assert registry.refresh(5.0) == []
    assert registry.entry("Built-in/calculator").spec.name == "calculator"  # no clash any more
    assert registry.entry("Text/calculator") is None
    assert registry.entry("Text/word_count").spec.name == "word_count"


def test_exposed_names_are_valid_and_unique(tmp_path: Path) -> None:
    odd = TextTools("My server (v2) ✓", tmp_path / "a.json").write("calculator")
    other = TextTools("My server (v2) ✗", tmp_path / "b.json").write("calculator")
    registry = ToolRegistry([BuiltinTools(calculator=True), odd, other])
    registry.refresh(5.0)
    names = [e.spec.name for e in registry.entries()]
    assert len(set(names)) == 3
    for name in names:
        assert all((c.isalnum() and c.isascii()) or c in "_-" for c in name) and len(name) <= 64, name
    assert names[1].startswith("My_server_v2") and names[1].endswith("calculator")
    request = registry.request([e.key for e in registry.entries()])
    assert [t.name for t in request.tools] == names  # ToolRequest accepts them (no two alike)


def test_a_source_that_cannot_be_listed_costs_only_itself(builtin: BuiltinTools, text: TextTools) -> None:
    registry = ToolRegistry([text, builtin])
    registry.refresh(5.0)
    text.manifest.write_text("[not json", encoding="utf-8")
    problems = registry.refresh(5.0)
    assert problems == ["The tool server Text answered with a damaged list of tools."]
    assert [e.key for e in registry.entries()] == ["Built-in/current_datetime", "Built-in/calculator"]
    assert registry.entry("Built-in/calculator").spec.name == "calculator"
    text.write("word_count")  # mended: listed again
    assert registry.refresh(5.0) == []
    assert registry.entry("Text/word_count") is not None


def test_a_source_that_breaks_unexpectedly_is_one_sentence(builtin: BuiltinTools, tmp_path: Path) -> None:
    broken = TextTools("Broken", tmp_path / "b.json").write("no_such_tool")  # its own code fails (KeyError)
    registry = ToolRegistry([broken, builtin])
    problems = registry.refresh(5.0)
    assert len(problems) == 1 and "Broken" in problems[0] and problems[0].endswith(".")
    assert [e.source for e in registry.entries()] == ["Built-in", "Built-in"]


def test_sources_are_listed_at_once(tmp_path: Path) -> None:
    """A slow server does not hold the others up: each listing waits for the other (a barrier), which
    only works when they run at the same time."""
    barrier = threading.Barrier(2)
    a = TextTools("A", tmp_path / "a.json", barrier=barrier).write("word_count")
    b = TextTools("B", tmp_path / "b.json", barrier=barrier).write("calculator")
    registry = ToolRegistry([a, b])
    assert registry.refresh(5.0) == []
    assert [e.key for e in registry.entries()] == ["A/word_count", "B/calculator"]


def test_a_source_listing_a_name_twice_or_two_sources_of_one_name(tmp_path: Path) -> None:
    twice = TextTools("Twice", tmp_path / "t.json").write("word_count", "word_count", "calculator")
    same = TextTools("Twice", tmp_path / "s.json").write("wait")
    registry = ToolRegistry([twice, same])
    problems = registry.refresh(5.0)
    assert [e.key for e in registry.entries()] == ["Twice/word_count", "Twice/calculator"]
    assert len(problems) == 2
    assert any("word_count" in p and "twice" in p for p in problems)
    assert any("Twice" in p and "same name" in p for p in problems)


def test_request_from_a_chats_enabled_keys(builtin: BuiltinTools, text: TextTools) -> None:
    registry = ToolRegistry([builtin, text])
    registry.refresh(5.0)
    request = registry.request({"Text/word_count", "Built-in/calculator", "Gone/tool"})
    assert [t.name for t in request.tools] == ["Built-in_calculator", "word_count"]  # registry order; unknown skipped
    assert request.choice == "auto" and request.active
    assert registry.request({"Gone/tool"}) is None
    assert registry.request(()) is None
    # a forced tool named by its key or by its offered name
    assert registry.request(["Text/word_count"], choice="Text/word_count").choice == "word_count"
    assert registry.request(["Built-in/calculator"], choice="Built-in_calculator").forced
    assert registry.request(["Text/word_count"], choice="required").choice == "required"


def test_providers_can_change(builtin: BuiltinTools, text: TextTools) -> None:
    registry = ToolRegistry([builtin])
    registry.refresh(5.0)
    registry.set_providers([builtin, text])
    assert registry.entry("Text/word_count") is None  # listed at the next refresh
    registry.refresh(5.0)
    assert registry.entry("Text/word_count") is not None
    registry.set_providers([text])
    assert [e.source for e in registry.entries()] == ["Text", "Text"]
    assert registry.entry("Text/calculator").spec.name == "calculator"


def test_tool_tokens_estimate() -> None:
    assert tool_tokens_estimate([]) == 0
    specs = BuiltinTools(datetime=True, calculator=True).list_tools(1.0)
    text = json.dumps([s.to_openai() for s in specs], ensure_ascii=False)
    assert tool_tokens_estimate(specs) == math.ceil(len(text) / 4)
    assert tool_tokens_estimate(specs[:1]) < tool_tokens_estimate(specs)
    big = ToolSpec("x", "word " * 400)
    assert 500 <= tool_tokens_estimate([big]) <= 560
