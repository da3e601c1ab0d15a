"""Every tool Ember can offer, from every source (the built-in tools, each MCP server), under a key
that stays the same ("source/name": what a chat's choices and "never ask" store), and under the name
the model is given: the tool's own, or "source_name" when two sources offer the same name, so each
call reaches the tool it meant. Listing runs every source at once, off the GUI thread; a source that
cannot be listed costs only its own tools and one sentence."""

from __future__ import annotations

import json
import math
import re
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ember_chat.engine.core.tools import TOOL_CHOICES, ChatTools, ToolProvider, ToolRequest, ToolSpec
from ember_chat.engine.errors import ToolError

_NAME_LIMIT = 64  # OpenAI's limit on a function's name, which servers and clients also apply
_LISTING_GRACE_S = 5.0  # beyond the sources' own timeout, before refresh stops waiting for one


@dataclass(frozen=True)
class ToolEntry:
    key: str  # "source/name" (stable, stored in ChatTools and never_ask)
    source: str
    spec: ToolSpec  # as offered to the model: spec.name is the exposed name
    original_name: str
    provider: ToolProvider


def tool_key(source: str, name: str) -> str:
    return f"{source}/{name}"


def _sanitize(text: str) -> str:
    """Letters, digits, '_' and '-' only (the names every template, grammar and API accepts)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_") or "tool"


def _exposed_names(listed: list[tuple[str, ToolSpec]]) -> list[str]:
    counts = Counter(spec.name for _, spec in listed)
    taken = {spec.name for _, spec in listed if counts[spec.name] == 1}
    names = []
    for source, spec in listed:
        if counts[spec.name] == 1:
            names.append(spec.name)
            continue
        base = _sanitize(f"{source}_{spec.name}")[:_NAME_LIMIT]
        name, n = base, 2
        while name in taken:
            suffix = f"_{n}"
            name, n = base[: _NAME_LIMIT - len(suffix)] + suffix, n + 1
        taken.add(name)
        names.append(name)
    return names


def tool_tokens_estimate(specs: Sequence[ToolSpec]) -> int:
    """About how many tokens the definitions take in the prompt (a quarter of their JSON's characters)."""
    if not specs:
        return 0
    return math.ceil(len(json.dumps([s.to_openai() for s in specs], ensure_ascii=False)) / 4)


class ToolRegistry:
    def __init__(self, providers: Sequence[ToolProvider]) -> None:
        self._lock = threading.Lock()
        self._providers: list[ToolProvider] = list(providers)
        self._listed: dict[int, list[ToolSpec]] = {}  # id(provider) -> its tools at the last refresh
        self._entries: list[ToolEntry] = []
        self._by_key: dict[str, ToolEntry] = {}
        self._by_exposed: dict[str, ToolEntry] = {}

    @property
    def providers(self) -> list[ToolProvider]:
        with self._lock:
            return list(self._providers)

    def set_providers(self, providers: Sequence[ToolProvider]) -> None:
        """The sources changed (Settings): those kept keep their tools; new ones are listed at the next refresh."""
        with self._lock:
            self._providers = list(providers)
            keep = {id(p) for p in self._providers}
            self._listed = {k: v for k, v in self._listed.items() if k in keep}
            self._rebuild()

    def refresh(self, timeout_s: float = 20.0) -> list[str]:
        """Lists every source at once (blocking: call it off the GUI thread). Returns one sentence per
        source that could not be listed; its tools are gone until it lists again, the others stay."""
        providers = self.providers
        results: dict[int, list[ToolSpec] | str] = {}

        def list_one(i: int, provider: ToolProvider) -> None:
            try:
                results[i] = list(provider.list_tools(timeout_s))
            except ToolError as e:
                results[i] = str(e)
            except Exception as e:  # a source's own bug costs its tools, never the listing of the others
                results[i] = f"The tools of {provider.source} could not be listed ({e})."

        threads = [
            threading.Thread(target=list_one, args=(i, p), name=f"tools-list-{p.source}", daemon=True)
            for i, p in enumerate(providers)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout_s + _LISTING_GRACE_S)  # the sources time out themselves; this is a backstop
        problems: list[str] = []
        listed: dict[int, list[ToolSpec]] = {}
        sources: set[str] = set()
        for i, provider in enumerate(providers):
            outcome = results.get(i)
            if provider.source in sources:
                problems.append(f"Two tool sources have the same name, {provider.source}; only the first one is used.")
            elif outcome is None:
                problems.append(f"{provider.source} did not list its tools within {timeout_s:g} seconds.")
            elif isinstance(outcome, str):
                problems.append(outcome)
            else:
                listed[id(provider)] = self._unique(provider.source, outcome, problems)
            sources.add(provider.source)
        with self._lock:
            if [id(p) for p in self._providers] == [id(p) for p in providers]:
                self._listed = listed
                self._rebuild()
        return problems

    @staticmethod
    def _unique(source: str, specs: list[ToolSpec], problems: list[str]) -> list[ToolSpec]:
        seen: set[str] = set()
        kept = []
        for spec in specs:
            if spec.name in seen:
                problems.append(f"{source} offers the tool {spec.name} twice; only the first one is used.")
                continue
            seen.add(spec.name)
            kept.append(spec)
        return kept

    def _rebuild(self) -> None:
        listed = [(p, spec) for p in self._providers for spec in self._listed.get(id(p), [])]
        names = _exposed_names([(p.source, spec) for p, spec in listed])
        self._entries = [
            ToolEntry(
                tool_key(p.source, spec.name),
                p.source,
                ToolSpec(name, spec.description, spec.parameters, spec.read_only),
                spec.name,
                p,
            )
            for (p, spec), name in zip(listed, names, strict=True)
        ]
        self._by_key = {e.key: e for e in self._entries}
        self._by_exposed = {e.spec.name: e for e in self._entries}

    def entries(self) -> list[ToolEntry]:
        with self._lock:
            return list(self._entries)

    def entry(self, key: str) -> ToolEntry | None:
        with self._lock:
            return self._by_key.get(key)

    def exposed(self, name: str) -> ToolEntry | None:
        """The tool the model means by `name` (the name it was offered)."""
        with self._lock:
            return self._by_exposed.get(name)

    def keys_on(self, chat: ChatTools) -> frozenset[str]:
        """The keys of the tools `chat` has on: those ticked one by one, and every tool listed now of the
        sources it has all of (`chat.servers`)."""
        with self._lock:
            return frozenset(chat.enabled) | {e.key for e in self._entries if e.source in chat.servers}

    def request(self, enabled: Iterable[str], choice: str = "auto") -> ToolRequest | None:
        """The tools a chat has on, in the registry's order, as a generation takes them; None when none
        of them is known now (`choice` may name a tool by its key or its offered name)."""
        wanted = set(enabled)
        with self._lock:
            specs = tuple(e.spec for e in self._entries if e.key in wanted)
            if choice not in TOOL_CHOICES and choice in self._by_key:
                choice = self._by_key[choice].spec.name
        return ToolRequest(specs, choice) if specs else None
