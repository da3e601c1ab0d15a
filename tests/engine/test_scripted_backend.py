"""The tests' fake models keep the engine's InferenceBackend protocol (engine/inference/backend.py):
ScriptedBackend, their one base (tests/helpers/scripted_backend.py), has each of the protocol's members
with the same parameters and annotations, and no fake changes a parameter the engine passes. A change
to the protocol fails here instead of in a fake that silently drifted from it."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.inference.backend import InferenceBackend
from tests.helpers.api_tools import ToolBackend
from tests.helpers.batched_fake import BatchedFake
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.scripted_backend import ScriptedBackend
from tests.helpers.tool_script import ToolScriptBackend

MEMBERS = [name for name in vars(InferenceBackend) if not name.startswith("_")]
FAKES = [FakeBackend, ToolScriptBackend, BatchedFake, ToolBackend]

Shape = tuple[str, list[tuple[str, object, bool, object]], object]


def shape(member: object) -> Shape:
    """What a caller relies on: a property (and its type), or a method's parameters (name, kind,
    whether it has a default, annotation) and its return annotation."""
    if isinstance(member, property):
        assert member.fget is not None
        return "property", [], inspect.signature(member.fget).return_annotation
    assert callable(member), member
    signature = inspect.signature(member)
    parameters = [(p.name, p.kind, p.default is not p.empty, p.annotation) for p in signature.parameters.values()]
    return "method", parameters, signature.return_annotation


def test_the_base_has_each_member_of_the_protocol_as_the_protocol_writes_it() -> None:
    assert {"loaded", "description", "load", "close", "request_stop", "chat", "complete"} <= set(MEMBERS)
    for name in MEMBERS:
        assert shape(getattr(ScriptedBackend, name)) == shape(getattr(InferenceBackend, name)), name
    backend: InferenceBackend = FakeBackend(n_tokens=1)  # (a type checker checks this against the protocol too)
    seen: list[float] = []
    description = backend.load(LoadConfig(Path("fake.gguf")), seen.append)
    assert backend.loaded and backend.description == description and seen == [1.0]
    backend.close()
    assert not backend.loaded and backend.description is None


@pytest.mark.parametrize("fake", FAKES, ids=lambda fake: fake.__name__)
def test_a_fake_keeps_the_parameters_the_engine_passes(fake: type[ScriptedBackend]) -> None:
    """A fake may add keyword-only parameters with defaults (BatchedFake's `batched`, `cancel`), never
    rename, drop or reorder the protocol's."""
    assert issubclass(fake, ScriptedBackend)
    for name in MEMBERS:
        kind, parameters, returns = shape(getattr(fake, name))
        want_kind, wanted, want_returns = shape(getattr(InferenceBackend, name))
        assert (kind, parameters[: len(wanted)], returns) == (want_kind, wanted, want_returns), (fake, name)
        extra = parameters[len(wanted) :]
        assert all(p_kind == inspect.Parameter.KEYWORD_ONLY and default for _, p_kind, default, _ in extra), (
            fake,
            name,
        )
