"""Record the reference renderings of the real chat templates (run once, by hand; not a test).

The reference is what Hugging Face `transformers` renders for the conversation — the same
`tokenizer.apply_chat_template` rendering the model's authors wrote the template for: its
`render_jinja_template` (sandboxed Jinja, trim_blocks/lstrip_blocks, loop controls, its own `tojson`,
`raise_exception`, `strftime_now`), with `add_generation_prompt=True`, the manifest's bos/eos
tokens, and the clock pinned to the manifest's date so that templates that print today's date
(Llama 3.x, gpt-oss) give stable text; templates that take a `date_string` get that date, as
llama.cpp's server gives them today's (Llama 3.1's would otherwise print "26 Jul 2024").

When the template refuses a conversation (Gemma 2: "System role not supported"), the reference
records the template's message and, as `fallback`, the rendering of the conversation the way Ember
retries it: the system prompt put at the start of the first user message.

    python -m venv /tmp/tf && /tmp/tf/bin/pip install transformers jinja2
    /tmp/tf/bin/python tests/templates/make_references.py

It writes tests/templates/references.json, with the transformers and jinja2 versions used.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path

import jinja2
import transformers
from transformers.utils import chat_template_utils

HERE = Path(__file__).parent


def variants(source: str) -> dict[str, dict[str, bool]]:
    """Keyword sets to render with: the default, and both positions of a thinking switch."""
    if "enable_thinking" not in source:
        return {"default": {}}
    return {"default": {}, "thinking_on": {"enable_thinking": True}, "thinking_off": {"enable_thinking": False}}


def system_merged(messages: list[dict]) -> list[dict]:
    """Ember's retry for a template without a system role (engine.inference.prompting.merge_system)."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    rest = [dict(m) for m in messages if m["role"] != "system"]
    for m in rest:
        if m["role"] == "user":
            m["content"] = f"{system}\n\n{m['content']}"
            break
    return rest


def render(source: str, messages: list[dict], entry: dict, kwargs: dict, tools: list[dict] | None = None) -> str:
    """One conversation as transformers renders it (with the generation prompt; `tools` given to the
    template when there are some)."""
    if "date_string" in source:  # today's date, as llama.cpp's server gives it (Llama 3.x)
        kwargs = {"date_string": chat_template_utils.datetime.now().strftime("%d %b %Y"), **kwargs}
    rendered, _ = chat_template_utils.render_jinja_template(
        conversations=[messages],
        tools=tools,
        chat_template=source,
        add_generation_prompt=True,
        bos_token=entry["bos"],
        eos_token=entry["eos"],
        **kwargs,
    )
    return rendered[0]


def load_manifest() -> dict:
    """The templates' manifest, with transformers' clock pinned to its date (templates that print
    today's date render the same every time)."""
    manifest = json.loads((HERE / "manifest.json").read_text(encoding="utf-8"))
    pinned = dt.datetime.fromisoformat(manifest["date"])

    class PinnedClock(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return pinned

    chat_template_utils.datetime = PinnedClock
    return manifest


def main() -> None:
    manifest = load_manifest()
    cases = []
    for entry in manifest["templates"]:
        source = (HERE / entry["file"]).read_text(encoding="utf-8")
        assert hashlib.sha256(source.encode()).hexdigest() == entry["sha256"], entry["file"]
        for conv_name, messages in manifest["conversations"].items():
            for variant, kwargs in variants(source).items():
                case = {"template": entry["name"], "conversation": conv_name, "variant": variant, "kwargs": kwargs}
                try:
                    case["expected"] = render(source, messages, entry, kwargs)
                except jinja2.TemplateError as exc:
                    case["error"] = str(exc)
                    case["fallback"] = render(source, system_merged(messages), entry, kwargs)
                cases.append(case)
    out = {
        "made_with": f"transformers {transformers.__version__} render_jinja_template, jinja2 {jinja2.__version__}",
        "date": manifest["date"],
        "cases": cases,
    }
    (HERE / "references.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(cases)} references written")


if __name__ == "__main__":
    main()
