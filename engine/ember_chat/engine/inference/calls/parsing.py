"""Tool calls read from a model's answer, per family format, as the answer streams.

The answer is Ember's canonical text (thinking as `<think>…</think>` at its start, see
core/reasoning.py): nothing inside the thinking is ever read as a call (LM Studio #1592). Formats, as
the templates in tests/templates teach them and llama.cpp's common/chat.cpp parses them:

- hermes (Qwen2.5/3, Hermes, and Ember's own description of tools for templates without any):
  `<tool_call>{"name": …, "arguments": {…}}</tool_call>`, several in a row; Qwen3-Coder's XML body
  (`<tool_call><function=NAME><parameter=KEY>value</parameter></function></tool_call>`) too;
- llama3 (Llama 3.1/3.2/3.3): a JSON object `{"name": …, "parameters": {…}}` as the answer, or after
  `<|python_tag|>` (also the built-in form `<|python_tag|>name.call(key="value")`);
- mistral (Nemo and later): `[TOOL_CALLS][{"name": …, "arguments": {…}, "id": …}, …]`, or the newer
  `[TOOL_CALLS]name[ARGS]{…}`;
- gpt-oss (harmony): `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}<|call|>`,
  or with the recipient in the header (` to=functions.NAME<|channel|>commentary json<|message|>{…}`).

`ToolCallStream` takes the answer in pieces and gives back the text that is not a call and the calls,
holding back text that may be the start of a call until it is decided. A call whose tool is unknown,
whose JSON is broken or whose arguments break the tool's schema comes back as an `InvalidCall` (to be
shown, and returned to the model as an error, never executed); one the answer ended inside as a
`CutShort`. The space after a call (between calls, or after the last) is not answer text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ember_chat.engine.core.reasoning import CLOSE, OPEN
from ember_chat.engine.core.tools import ToolCall, ToolSpec
from ember_chat.engine.inference.calls.formats import (
    DROPS,
    STARTS,
    CutShort,
    InvalidCall,
    ParsedChunk,
    ToolFormat,
    broken_call,
    call_triggers,
    check_call,
    cut_short,
    tool_format_for,
    with_unique_id,
)

__all__ = [
    "CutShort",
    "InvalidCall",
    "ParsedChunk",
    "ToolCallStream",
    "ToolFormat",
    "call_triggers",
    "check_call",
    "parse_tool_calls",
    "tool_format_for",
]


_LLAMA_ENDS = ("<|eom_id|>", "<|eot_id|>")
_BARE_JSON_CALL = ('{"name":', '{"type":"function"')
_BUILTIN_CALL = re.compile(r"\s*([A-Za-z_][\w.-]*)\.call\((.*)\)\s*$", re.S)
_XML_FUNCTION = re.compile(r"\s*<function=([^>\s]+)>")
_XML_PARAMETER = re.compile(r"<parameter=([^>\s]+)>\n?(.*?)\n?</parameter>", re.S)
_BUILTIN_ARG = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


class ToolCallStream:
    """Feed the answer's pieces (canonical text); each `feed` gives what is decided so far."""

    def __init__(self, fmt: ToolFormat, tools: Sequence[ToolSpec], thinking: bool = False) -> None:
        """`thinking`: the text starts inside a thinking block already (its `<think>` was in the prompt)."""
        self.fmt = fmt
        self.tools = tuple(tools)
        self._phase = "thinking" if thinking else "start"
        self._buf = ""
        self._opener = ""  # the marker that opened the call being read
        self._call_position = True  # a bare JSON call (Llama 3.x) may start here
        self._markers = STARTS[fmt] + DROPS.get(fmt, ())
        self._scan: _JsonScan | None = None  # how far the call's JSON has been read (the body only grows)
        self._fed = 0  # characters fed so far (the buffer is always their end)
        self.call_start: int | None = None  # where the call being read opened, in all the text fed
        self._ids: set[str] = set()  # the ids of this answer's calls (each one once)
        self._after_call = False  # nothing but space since a call ended

    @property
    def in_call(self) -> bool:
        """A call has opened and is being read (its opener was seen, its end not yet)."""
        return self._phase == "call"

    @property
    def opener(self) -> str:
        """The words that opened the call being read."""
        return self._opener

    @property
    def call_text(self) -> str | None:
        """The text of the call being read so far, from its opener (None when no call is being read)."""
        if not self.in_call:
            return None
        return self._buf if self._opener == "{" else self._opener + self._buf  # (a bare JSON call: "{" is its own)

    def feed(self, piece: str) -> ParsedChunk:
        self._buf += piece
        self._fed += len(piece)
        return self._run(final=False)

    def flush(self) -> ParsedChunk:
        """The end of the answer: what was held back is decided (a call cut short is read as it is)."""
        return self._run(final=True)

    def _run(self, final: bool) -> ParsedChunk:
        text: list[str] = []
        calls: list[ToolCall | InvalidCall] = []
        while True:
            before = (self._phase, len(self._buf))
            getattr(self, f"_step_{self._phase}")(text, calls, final)
            if (self._phase, len(self._buf)) == before:
                break
        if final and self._buf:
            text.append(self._buf)
            self._buf = ""
        calls = [with_unique_id(c, self._ids) for c in calls]
        return ParsedChunk(
            "".join(text),
            tuple(c for c in calls if isinstance(c, ToolCall)),
            tuple(c for c in calls if isinstance(c, InvalidCall)),
        )

    def _step_start(self, text: list[str], calls: list, final: bool) -> None:
        stripped = self._buf.lstrip()
        if stripped.startswith(OPEN):
            cut = len(self._buf) - len(stripped) + len(OPEN)
            text.append(self._buf[:cut])
            self._buf, self._phase = self._buf[cut:], "thinking"
        elif final or (stripped and not OPEN.startswith(stripped)):
            self._phase = "answer"

    def _step_thinking(self, text: list[str], calls: list, final: bool) -> None:
        end = self._buf.find(CLOSE)
        if end >= 0:
            text.append(self._buf[: end + len(CLOSE)])
            self._buf, self._phase = self._buf[end + len(CLOSE) :], "answer"
            return
        keep = 0 if final else _partial_suffix(self._buf, (CLOSE,))
        text.append(self._buf[: len(self._buf) - keep])
        self._buf = self._buf[len(self._buf) - keep :]

    def _step_answer(self, text: list[str], calls: list, final: bool) -> None:
        if self._after_call:  # the space after a call is the grammar's separator, not the answer's text
            stripped = self._buf.lstrip()
            if not stripped:
                if final:
                    self._buf = ""
                return
            if any(stripped.startswith(m) for m in self._markers):
                self._buf = stripped
            elif not final and any(m.startswith(stripped) for m in self._markers):
                return  # perhaps the next call's opener
            self._after_call = False
        if self.fmt is ToolFormat.LLAMA3 and self._call_position:
            stripped = self._buf.lstrip().lstrip(";").lstrip()
            if not stripped and not final:
                return  # whitespace: a call may still follow
            if stripped.startswith("{") and _may_be_bare_call(stripped):
                # the spaces and `;` between a Llama model's calls are not part of its answer
                self._buf, self._phase, self._opener = stripped, "call", "{"
                self.call_start = self._fed - len(self._buf)
                return
            self._call_position = False
        marker, at = _first_marker(self._buf, self._markers)
        if marker is None:
            keep = 0 if final else _partial_suffix(self._buf, self._markers)
            emitted = self._buf[: len(self._buf) - keep]
            text.append(emitted)
            self._buf = self._buf[len(self._buf) - keep :]
            self._call_position = self._call_position and not emitted.strip()
            return
        text.append(self._buf[:at])
        self._call_position = self._call_position and not self._buf[:at].strip()
        self._buf = self._buf[at + len(marker) :]
        if marker in STARTS[self.fmt]:
            self._phase, self._opener = "call", marker
            self.call_start = self._fed - len(self._buf) - len(marker)

    def _step_call(self, text: list[str], calls: list, final: bool) -> None:
        read = getattr(self, f"_read_{self.fmt.name.lower()}")(self._buf, final)
        if read is None:
            return
        found, used, as_text = read
        if as_text:  # it was not a call after all (a JSON answer to a Llama model's user)
            text.append(self._buf[:used])
            self._call_position = False
        calls.extend(found)
        self._buf, self._phase, self._scan = self._buf[used:], "answer", None
        self._after_call = bool(found)
        self.call_start = None
        self._call_position = self._call_position or bool(found)

    def _json_end(self, body: str, start: int) -> int | None:
        """Where the JSON at `start` ends, carried on from where the last piece left it: a long argument
        streamed in small pieces is read once, not again at every piece."""
        if self._scan is None or self._scan.start != start:
            self._scan = _JsonScan(start)
        return self._scan.end(body)

    # Each reader: None while the call is incomplete, else (calls, characters used, whether it was text).

    def _read_hermes(self, body: str, final: bool) -> tuple[list, int, bool] | None:
        lead = len(body) - len(body.lstrip())
        end = self._json_end(body, lead) if body[lead : lead + 1] == "{" else None
        if end is not None:  # the object decides, so an argument may contain "</tool_call>" itself
            rest = body[end:].lstrip()
            close = "</tool_call>"
            if not final and close.startswith(rest) and len(rest) < len(close):
                return None  # its closing tag may be on its way
            used = len(body) - len(rest) + len(close) if rest.startswith(close) else end
            return [self._from_json(body[:end], "<tool_call>" + body[:used])], used, False
        if body[lead : lead + 1] == "{" and not final:
            return None  # the object is not complete yet
        close_at = body.find("</tool_call>")
        if close_at < 0:
            return cut_short("<tool_call>", body) if final else None
        if body[lead:].startswith("<function="):
            used = len(body) if close_at < 0 else close_at + len("</tool_call>")
            return (
                [self._from_xml(body[: close_at if close_at >= 0 else len(body)], "<tool_call>" + body[:used])],
                used,
                False,
            )
        used = len(body) if close_at < 0 else close_at + len("</tool_call>")
        return (
            [self._from_json(body[: close_at if close_at >= 0 else len(body)], "<tool_call>" + body[:used])],
            used,
            False,
        )

    def _read_llama3(self, body: str, final: bool) -> tuple[list, int, bool] | None:
        if self._opener == "{":
            end = self._json_end(body, 0)
            if end is None:
                if not _may_be_bare_call(body):
                    return [], len(body), True
                return cut_short("", body) if final else None
            try:
                obj = json.loads(body[:end])
            except json.JSONDecodeError:
                return [], end, True
            if not (isinstance(obj, dict) and "name" in obj and ("parameters" in obj or "arguments" in obj)):
                return [], end, True
            return [self._from_object(obj, body[:end])], end, False
        lead = len(body) - len(body.lstrip())
        end = self._json_end(body, lead) if body[lead : lead + 1] == "{" else None
        if end is not None:  # a JSON call: the object decides where it ends (not a marker in its strings)
            rest = body[end:]
            mark = next((m for m in _LLAMA_ENDS if rest.startswith(m)), "")
            if not final and not mark and any(m.startswith(rest) for m in _LLAMA_ENDS):
                return None
            return [self._from_json(body[:end], "<|python_tag|>" + body[:end])], end + len(mark), False
        if body[lead : lead + 1] == "{" and not final:
            return None  # the object is not complete yet
        ends = [(body.find(m), m) for m in _LLAMA_ENDS if m in body]
        if not ends and not final:
            return None
        if not ends and body[lead : lead + 1] == "{":  # (final: the answer ended inside its JSON)
            return cut_short("<|python_tag|>", body)
        at, mark = min(ends) if ends else (len(body), "")
        inner, used = body[:at], at + len(mark)
        builtin = _BUILTIN_CALL.match(inner)
        if builtin and not inner.lstrip().startswith("{"):
            args = {k: json.loads(f'"{v}"') for k, v in _BUILTIN_ARG.findall(builtin.group(2))}
            return [check_call(builtin.group(1), args, "<|python_tag|>" + inner, self.tools)], used, False
        return [self._from_json(inner, "<|python_tag|>" + inner)], used, False

    def _read_mistral(self, body: str, final: bool) -> tuple[list, int, bool] | None:
        lead = len(body) - len(body.lstrip())
        if body[lead:].startswith("["):
            end = self._json_end(body, lead)
            if end is None:
                return self._mistral_cut(body, lead + 1) if final else None
            raw = "[TOOL_CALLS]" + body[:end]
            try:
                items = json.loads(body[lead:end])
            except json.JSONDecodeError:
                return [broken_call(raw, "the tool calls are not valid JSON.")], end, False
            items = items if isinstance(items, list) else [items]
            return [self._from_object(item, raw) for item in items], end, False
        at = body.find("[ARGS]")  # Mistral Small 3.2 / Magistral: NAME[CALL_ID]id[ARGS]{...}
        start = body.find("{", at) if at >= 0 else -1
        end = self._json_end(body, start) if start >= 0 else None
        if end is None:
            return cut_short("[TOOL_CALLS]", body) if final else None
        head = body[:at]
        name, _, call_id = head.partition("[CALL_ID]")
        try:
            args = json.loads(body[start:end])
        except json.JSONDecodeError:
            return [broken_call("[TOOL_CALLS]" + body[:end], "the call's arguments are not valid JSON.")], end, False
        return (
            [check_call(name.strip(), args, "[TOOL_CALLS]" + body[:end], self.tools, call_id.strip() or None)],
            end,
            False,
        )

    def _mistral_cut(self, body: str, at: int) -> tuple[list, int, bool]:
        """An array of calls the answer ended inside: its complete calls, and the rest cut short."""
        found: list[ToolCall | InvalidCall] = []
        while True:
            while body[at : at + 1] in (" ", "\n", ","):
                at += 1
            end = _JsonScan(at).end(body) if body[at : at + 1] == "{" else None
            if end is None:
                break
            found.append(self._from_json(body[at:end], "[TOOL_CALLS]" + body[at:end]))
            at = end
        return [*found, *cut_short("[TOOL_CALLS]", body[at:])[0]], len(body), False

    def _read_gpt_oss(self, body: str, final: bool) -> tuple[list, int, bool] | None:
        raw = self._opener + body
        header_end = body.find("<|message|>")
        if header_end < 0:
            return cut_short(self._opener, body) if final else None
        name = re.split(r"\s|<\|", body[:header_end], maxsplit=1)[0]
        start = header_end + len("<|message|>")
        lead = len(body) - start - len(body[start:].lstrip())
        is_json = body[start + lead : start + lead + 1] in ("{", "[")
        end = self._json_end(body, start + lead) if is_json else None
        if end is None:
            if not final and (is_json or "<|call|>" not in body[start:]):
                return None  # the arguments are still coming
            stop = body.find("<|call|>", start)
            if is_json and stop < 0:  # (final: the answer ended inside its arguments)
                return cut_short(self._opener, body)
            end = len(body) if stop < 0 else stop
        rest = body[end:]
        if not final and "<|call|>".startswith(rest):
            return None  # the call's end marker may be on its way
        used = end + len("<|call|>") if rest.startswith("<|call|>") else end
        return [check_call(name, _loads(body[start:end]), raw[: len(self._opener) + used], self.tools)], used, False

    def _from_xml(self, inner: str, raw: str) -> ToolCall | InvalidCall:
        """Qwen3-Coder's calls: `<function=NAME><parameter=KEY>\nvalue\n</parameter>…</function>`; a value
        is text where the tool's schema says string, else JSON (as llama.cpp reads them)."""
        head = _XML_FUNCTION.match(inner)
        if head is None:
            return broken_call(raw, "the tool call is not a <function=…> block.")
        spec = next((t for t in self.tools if t.name == head.group(1)), None)
        properties = (spec.parameters.get("properties") or {}) if spec else {}
        arguments: dict[str, Any] = {}
        for key, value in _XML_PARAMETER.findall(inner):
            kind = properties.get(key, {}).get("type") if isinstance(properties.get(key), dict) else None
            arguments[key] = value if kind == "string" else _loads_or_text(value)
        return check_call(head.group(1), arguments, raw, self.tools)

    def _from_json(self, inner: str, raw: str) -> ToolCall | InvalidCall:
        try:
            obj = json.loads(inner)
        except json.JSONDecodeError:
            return broken_call(raw, "the tool call is not valid JSON.")
        return self._from_object(obj, raw)

    def _from_object(self, obj: Any, raw: str) -> ToolCall | InvalidCall:
        if not isinstance(obj, dict):
            return broken_call(raw, "a tool call must be a JSON object with a name and arguments.")
        if isinstance(obj.get("function"), dict):  # {"type": "function", "function": {...}}
            obj = {**obj["function"], "id": obj.get("id")}
        arguments = obj.get("arguments", obj.get("parameters"))
        return check_call(obj.get("name"), arguments, raw, self.tools, obj.get("id"))


def parse_tool_calls(text: str, fmt: ToolFormat, tools: Sequence[ToolSpec], thinking: bool = False) -> ParsedChunk:
    """A whole answer's text and calls (the stream, fed at once)."""
    stream = ToolCallStream(fmt, tools, thinking)
    first, last = stream.feed(text), stream.flush()
    return ParsedChunk(first.text + last.text, first.calls + last.calls, first.invalid + last.invalid)


def _loads(text: str) -> Any:
    try:
        return json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        return text  # check_call reports it


class _JsonScan:
    """Where the JSON object or array opening at `start` ends (the index after it), for text that grows:
    the scan's state is kept between calls, so each piece is read once."""

    def __init__(self, start: int) -> None:
        self.start = self.pos = start
        self.depth, self.in_string, self.escaped = 0, False, False

    def end(self, text: str) -> int | None:
        depth, in_string, escaped = self.depth, self.in_string, self.escaped
        for i in range(self.pos, len(text)):
            c = text[i]
            if in_string:
                if escaped:
                    escaped = False
                elif c == "\\":
                    escaped = True
                elif c == '"':
                    in_string = False
            elif c == '"':
                in_string = True
            elif c in "{[":
                depth += 1
            elif c in "}]":
                depth -= 1
                if depth == 0:
                    return i + 1  # (a finished scan is not resumed: the reader uses its end)
        self.pos, self.depth, self.in_string, self.escaped = len(text), depth, in_string, escaped
        return None


def _loads_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _may_be_bare_call(text: str) -> bool:
    """`text` (starting with `{`) can still become a Llama 3.x call object."""
    compact = re.sub(r"\s+", "", text[:64])
    return any(c.startswith(compact) or compact.startswith(c) for c in _BARE_JSON_CALL)


def _first_marker(text: str, markers: Sequence[str]) -> tuple[str | None, int]:
    best: tuple[str | None, int] = (None, len(text))
    for marker in markers:
        at = text.find(marker)
        if 0 <= at < best[1] or (at == best[1] and best[0] is not None and len(marker) > len(best[0])):
            best = (marker, at)
    return best


def _partial_suffix(text: str, markers: Sequence[str]) -> int:
    """Length of the longest end of `text` that is the beginning of a marker."""
    longest = 0
    for marker in markers:
        for n in range(min(len(marker) - 1, len(text)), longest, -1):
            if text.endswith(marker[:n]):
                longest = n
                break
    return longest
