"""Record transformers' renderings of tool conversations through the real chat templates (run once, by
hand; not a test), the way make_references.py records the plain ones: `render_jinja_template` with
`tools=` (OpenAI's function list), assistant `tool_calls` and `tool` messages in the shape
transformers documents for chat templates (arguments as a mapping), the clock pinned to the manifest's
date.

Only the templates that render tools themselves are recorded; for the others (no `tools` in their
text) Ember writes the tools in Hermes words into the messages, which tests/engine/test_tool_templates.py checks.
Llama 3.x refuses a turn with several calls ("This model only supports single tool-calls at once!")
and gpt-oss keeps only its first call, so the parallel turn is also recorded as `as_single_calls`:
written one call per assistant message, each followed by its result, as Ember sends it to them.

    python -m venv /tmp/tf && /tmp/tf/bin/pip install transformers jinja2
    /tmp/tf/bin/python tests/templates/make_tool_references.py

It writes tests/templates/tool_references.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
import transformers
from make_references import load_manifest, render  # (run as a script: its folder is on the path)

HERE = Path(__file__).parent

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}
ASK = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris and Lyon?"}]


def call(call_id: str, city: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": {"city": city}}}


def result(call_id: str, text: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


CONVERSATIONS = {
    "tools_offered": ASK,
    "round_trip": [
        *ASK,
        {"role": "assistant", "content": "", "tool_calls": [call("call8f2Kq", "Paris")]},
        result("call8f2Kq", '{"temperature": 18}'),
    ],
    "answer_after_tools": [
        *ASK,
        {"role": "assistant", "content": "", "tool_calls": [call("call8f2Kq", "Paris")]},
        result("call8f2Kq", '{"temperature": 18}'),
        {"role": "assistant", "content": "It is 18 °C in Paris."},
        {"role": "user", "content": "Thanks!"},
    ],
    "parallel": [
        *ASK,
        {"role": "assistant", "content": "", "tool_calls": [call("call8f2Kq", "Paris"), call("callZz9Lm", "Lyon")]},
        result("call8f2Kq", '{"temperature": 18}'),
        result("callZz9Lm", '{"temperature": 21}'),
    ],
}
AS_SINGLE_CALLS = {
    "parallel": [
        *ASK,
        {"role": "assistant", "content": "", "tool_calls": [call("call8f2Kq", "Paris")]},
        result("call8f2Kq", '{"temperature": 18}'),
        {"role": "assistant", "content": "", "tool_calls": [call("callZz9Lm", "Lyon")]},
        result("callZz9Lm", '{"temperature": 21}'),
    ],
}


def main() -> None:
    manifest = load_manifest()
    cases = []
    for entry in manifest["templates"]:
        source = (HERE / entry["file"]).read_text(encoding="utf-8")
        if "tools" not in source:
            continue
        for name, messages in CONVERSATIONS.items():
            case = {"template": entry["name"], "conversation": name}
            try:
                case["expected"] = render(source, messages, entry, {}, [WEATHER])
            except jinja2.TemplateError as exc:
                case["error"] = str(exc)
            if name in AS_SINGLE_CALLS:
                case["as_single_calls"] = render(source, AS_SINGLE_CALLS[name], entry, {}, [WEATHER])
            cases.append(case)
    out = {
        "made_with": f"transformers {transformers.__version__} render_jinja_template, jinja2 {jinja2.__version__}",
        "date": manifest["date"],
        "tools": [WEATHER],
        "conversations": CONVERSATIONS,
        "cases": cases,
    }
    (HERE / "tool_references.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(cases)} references written")


if __name__ == "__main__":
    main()
