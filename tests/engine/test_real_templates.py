"""Real chat templates of eleven models (nine families) render through Ember exactly as the
reference renderings recorded with `transformers` (tests/templates/make_references.py says how)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path

import pytest

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.reasoning import CLOSE, OPEN
from ember_chat.engine.inference.prompt.templates import BuiltinTemplate, JinjaTemplate, render_chat
from tests.helpers.paths import TESTS

HERE = TESTS / "templates"
MANIFEST = json.loads((HERE / "manifest.json").read_text(encoding="utf-8"))
REFERENCES = json.loads((HERE / "references.json").read_text(encoding="utf-8"))
ENTRIES = {entry["name"]: entry for entry in MANIFEST["templates"]}
THINKING = {"default": None, "thinking_on": True, "thinking_off": False}


def ember_messages(conversation: list[dict]) -> list[ChatMessage]:
    """A conversation as Ember stores it: an answer's thinking inline, before the answer."""
    out = []
    for m in conversation:
        content = m["content"]
        if m.get("reasoning_content"):
            content = f"{OPEN}\n{m['reasoning_content']}\n{CLOSE}\n\n{content}"
        out.append(ChatMessage(m["role"], content))
    return out


def ember_template(name: str) -> JinjaTemplate:
    entry = ENTRIES[name]
    source = (HERE / entry["file"]).read_text(encoding="utf-8")
    pinned = datetime.fromisoformat(REFERENCES["date"])
    return JinjaTemplate(source, entry["bos"], entry["eos"], clock=lambda: pinned)


def test_the_stored_templates_are_the_named_ones() -> None:
    families = {entry["name"].split("-")[0].rstrip("0123456789.") for entry in MANIFEST["templates"]}
    assert len(MANIFEST["templates"]) >= 8 and len(families) >= 8, families
    for entry in MANIFEST["templates"]:
        text = (HERE / entry["file"]).read_bytes()
        assert hashlib.sha256(text).hexdigest() == entry["sha256"], entry["file"]
    covered = {(c["template"], c["conversation"]) for c in REFERENCES["cases"]}
    assert covered == {(t, c) for t in ENTRIES for c in MANIFEST["conversations"]}


@pytest.mark.parametrize(
    "case",
    REFERENCES["cases"],
    ids=[f"{c['template']}-{c['conversation']}-{c['variant']}" for c in REFERENCES["cases"]],
)
def test_renders_as_the_reference(case: dict) -> None:
    messages = ember_messages(MANIFEST["conversations"][case["conversation"]])
    prompt, notice = render_chat(
        ember_template(case["template"]), messages, BuiltinTemplate("chatml"), THINKING[case["variant"]]
    )
    if "expected" in case:
        assert notice is None
        assert prompt == case["expected"]
    else:
        # the template refused the conversation (Gemma 2: no system role): Ember says so and retries
        # with the system prompt in the first user message, rendered by the model's own template
        assert notice is not None and "system prompt" in notice
        assert prompt == case["fallback"]


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_bos_is_written_once_at_most(name: str) -> None:
    entry = ENTRIES[name]
    messages = ember_messages(MANIFEST["conversations"]["multi_turn"])
    prompt, _ = render_chat(ember_template(name), messages, BuiltinTemplate("chatml"))
    if entry["bos"]:
        assert prompt.count(entry["bos"]) == 1 and prompt.startswith(entry["bos"])


def test_earlier_thinking_never_reaches_the_prompt() -> None:
    thought = MANIFEST["conversations"]["earlier_thinking"][2]["reasoning_content"]
    messages = ember_messages(MANIFEST["conversations"]["earlier_thinking"])
    for name in ENTRIES:
        prompt, _ = render_chat(ember_template(name), messages, BuiltinTemplate("chatml"))
        assert thought not in prompt, name


def test_thinking_switch_is_found_in_the_templates_that_have_one() -> None:
    with_switch = {name for name in ENTRIES if ember_template(name).thinking_switch}
    assert with_switch == {"qwen3", "smollm3", "deepseek-r1-distill", "gemma-4"}


def test_the_date_comes_from_the_clock() -> None:
    prompt, _ = render_chat(ember_template("llama-3.2"), [ChatMessage("user", "Hi")], BuiltinTemplate("chatml"))
    assert "Today Date: 15 Jan 2026" in prompt
    live = JinjaTemplate((HERE / ENTRIES["gpt-oss"]["file"]).read_text(encoding="utf-8"), "", "")
    assert f"Current date: {datetime.now():%Y-%m-%d}" in live.render([ChatMessage("user", "Hi")])


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_a_model_file_carrying_the_template_chats_with_it(name: str, tmp_path: Path) -> None:
    """The template read from a GGUF's metadata, through the runtime: the model loads (llama-cpp-python
    compiles its own copy of the template too), the chat uses the model's template, not a fallback."""
    from ember_chat.engine.core.params import SamplingParams
    from ember_chat.engine.inference.events import Finished, TemplateFallback
    from tests.helpers.gguf_factory import TinySpec, write_tiny_model
    from tests.helpers.runtime_support import loaded

    source = (HERE / ENTRIES[name]["file"]).read_text(encoding="utf-8")
    path = write_tiny_model(tmp_path / f"{name}.gguf", TinySpec(chat_template=source))
    with loaded(path, n_ctx=2048) as rt:
        messages = ember_messages(MANIFEST["conversations"]["earlier_thinking"])
        events = list(rt.chat(messages, SamplingParams(max_tokens=2, seed=1)))
    notices = [e.message for e in events if isinstance(e, TemplateFallback)]
    if name == "gemma-2":  # no system role: the system prompt moves into the first message
        assert len(notices) == 1 and "system prompt" in notices[0]
    else:
        assert notices == []
    assert isinstance(events[-1], Finished)
