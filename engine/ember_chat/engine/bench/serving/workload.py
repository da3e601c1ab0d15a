"""What the serving lab sends: requests that look like a desktop's, shipped with Ember (no download),
or the user's own conversations in a ShareGPT-style JSON file.

Synthetic prompts are common words (bench/targets.words_text), different for every request so that no
server's prompt cache answers them; their lengths are drawn from a log-normal distribution (chat
prompts are mostly short, a few long), as are the answers' lengths, which are sent as `max_tokens`
with `ignore_eos` so each request generates what it was drawn (llama.cpp's server, vLLM and Ember honour
it; a server that stops early is measured on the tokens it gave)."""

from __future__ import annotations

import itertools
import json
import math
import random
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from ember_chat.engine.bench.targets import words_text
from ember_chat.engine.errors import EmberError

# A word of English text is about 1.3 tokens in the vocabularies of current chat models.
TOKENS_PER_WORD = 1.3


@dataclass(frozen=True)
class ToolCall:
    """A function call the server answered with (its streamed `tool_calls` deltas put together)."""

    id: str
    name: str
    arguments: str  # JSON text, as the model wrote it


# A message: (role, content), or an OpenAI message object as sent (a tool call and its result)
Message = tuple[str, str] | dict[str, object]


@dataclass(frozen=True)
class RequestSpec:
    """One chat completion: its messages and the tokens it asks for."""

    messages: tuple[Message, ...]
    max_tokens: int
    tools: tuple[dict[str, object], ...] = ()  # the functions the model may call (OpenAI's `tools`)
    # (a tool-calling answer must be let to stop: ignore_eos would generate past the call)
    ignore_eos: bool = True

    def body(self, model: str) -> dict[str, object]:
        body: dict[str, object] = {
            "model": model,
            "messages": [m if isinstance(m, dict) else {"role": m[0], "content": m[1]} for m in self.messages],
            "max_tokens": self.max_tokens,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.ignore_eos:
            body["ignore_eos"] = True
        if self.tools:
            body["tools"] = list(self.tools)
        return body


@dataclass(frozen=True)
class TurnEnd:
    """A user's turn that got its final answer (the `tools` workload): whether the server called the tool
    on the way, and the seconds from the user's turn to that answer (its requests' time; the tool answers
    at once)."""

    called_tool: bool
    seconds: float


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    requests: tuple[RequestSpec, ...]  # taken in turn, from the first again when a run needs more (a file's)
    landing: RequestSpec | None = None  # one request sent mid-run (a long document pasted into a chat)

    def request(self, index: int) -> RequestSpec:
        return self.requests[index % len(self.requests)]

    def done(self, index: int, answer: str | None, tool_calls: tuple[ToolCall, ...] = ()) -> TurnEnd | None:
        """Request `index` was answered (`answer` and the `tool_calls` it made; answer None: it failed). A
        workload whose next requests depend on the answers (ChatSessions, ToolLoops) keeps them; these
        requests do not. A user's turn that ended here with its final answer is returned (ToolLoops')."""
        return None


@dataclass(frozen=True)
class Shape:
    """A synthetic workload's lengths: median and spread (log-normal sigma) of the prompt's words and
    of the answer's tokens, each kept within [low, high]."""

    prompt_words: tuple[int, float, int, int]
    output_tokens: tuple[int, float, int, int]
    description: str


SHAPES = {
    "chat": Shape((120, 0.8, 8, 1500), (160, 0.6, 16, 512), "chat turns: ~120-word prompts, ~160-token answers"),
    "short": Shape((24, 0.3, 8, 64), (16, 0.2, 8, 32), "short questions and short answers (quick checks)"),
    "document": Shape((1200, 0.3, 600, 3000), (200, 0.3, 64, 400), "questions on a long pasted document"),
}


def _drawn(rng: random.Random, median: int, sigma: float, low: int, high: int) -> int:
    return max(low, min(high, round(median * math.exp(rng.gauss(0.0, sigma)))))


@dataclass(frozen=True)
class Synthetic(Workload):
    """Requests of a shape (SHAPES), each drawn from the seed and its own index: as many as a sweep takes,
    none the same as another (a server's prompt cache answers none of them)."""

    shape: Shape = SHAPES["short"]
    seed: int = 0

    def request(self, index: int) -> RequestSpec:
        rng = random.Random(self.seed * 1_000_003 + index)
        words = _drawn(rng, *self.shape.prompt_words)
        text = f"Request {index}. " + words_text(words, self.seed * 100_003 + index)
        return RequestSpec((("user", text),), _drawn(rng, *self.shape.output_tokens))


def synthetic(name: str, count: int = 200, seed: int = 0) -> Workload:
    """Requests of the named shape (SHAPES), the same for the same seed (`count`: how many `requests`
    lists, for a look at them; `request(i)` draws any)."""
    shape = SHAPES.get(name)
    if shape is None:
        raise EmberError(
            f"There is no workload {name!r}: use one of {', '.join([*SHAPES, *SCENARIOS])} or a ShareGPT file."
        )
    made = Synthetic(name, shape.description, (), shape=shape, seed=seed)
    return replace(made, requests=tuple(made.request(i) for i in range(count)))


def sharegpt(path: Path, max_tokens_cap: int = 1024) -> Workload:
    """The conversations of a ShareGPT-style file (a list of {"conversations": [{"from": "human",
    "value": …}, {"from": "gpt", "value": …}, …]}): each one's first human turn is a request, asking for
    as many tokens as its reply had (estimated from its words, at most `max_tokens_cap`). A file that is
    not one is refused, naming what is wrong."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise EmberError(f"The workload file {path} cannot be read: {exc.strerror or exc}.") from None
    except UnicodeDecodeError:
        raise EmberError(f"The workload file {path.name} is not UTF-8 text.") from None
    except json.JSONDecodeError as exc:
        raise EmberError(f"The workload file {path.name} is not JSON: {exc.msg} at line {exc.lineno}.") from None
    if not isinstance(data, list):
        raise EmberError(f"The workload file {path.name} must be a JSON list of conversations (ShareGPT's shape).")
    specs = []
    for n, item in enumerate(data):
        turns = item.get("conversations") if isinstance(item, dict) else None
        if not isinstance(turns, list):
            raise EmberError(f'The workload file {path.name}: entry {n} has no "conversations" list.')
        pair = _first_exchange(turns)
        if pair is not None:
            question, answer = pair
            tokens = max(1, min(max_tokens_cap, round(len(answer.split()) * TOKENS_PER_WORD)))
            specs.append(RequestSpec((("user", question),), tokens))
    if not specs:
        raise EmberError(
            f"The workload file {path.name} has no conversation with a human turn followed by a gpt turn "
            '({"from": "human", "value": …} then {"from": "gpt", "value": …}).'
        )
    return Workload(path.stem, f"{len(specs)} conversations from {path.name}", tuple(specs))


def _first_exchange(turns: list[object]) -> tuple[str, str] | None:
    for first, second in itertools.pairwise(turns):
        if not (isinstance(first, dict) and isinstance(second, dict)):
            continue
        question, answer = first.get("value"), second.get("value")
        asked = isinstance(question, str) and question.strip() and isinstance(answer, str)
        if first.get("from") == "human" and second.get("from") == "gpt" and asked:
            return str(question), str(answer)
    return None


@dataclass
class _Conversation:
    number: int
    messages: list[tuple[str, str]] = field(default_factory=list)
    turns: int = 0


class _Sessions:
    """The conversations of a ChatSessions workload: those waiting for their user's next turn (the last
    answered first, so a user keeps its conversation) and those with a turn in flight."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[_Conversation] = []
        self.out: dict[int, _Conversation] = {}
        self.made = 0


@dataclass(frozen=True)
class ChatSessions(Workload):
    """Users who each keep a conversation: a request is the conversation so far — every earlier turn
    and the answer the server gave to it — plus a new user turn, up to `turns` turns, then that user
    starts a new conversation. A server that keeps the conversation's prefix (llama.cpp's prompt cache,
    vLLM's and SGLang's prefix caching, Ember's KV snapshots) reads only the new turn; one that does not
    reads all of it again, and its TTFT grows with the conversation."""

    turns: int = 6
    seed: int = 0
    user: tuple[int, float, int, int] = (40, 0.6, 8, 200)  # (words: median, log-normal sigma, low, high)
    answer: tuple[int, float, int, int] = (120, 0.5, 16, 320)  # (tokens)
    _sessions: _Sessions = field(default_factory=_Sessions, repr=False, compare=False)

    def request(self, index: int) -> RequestSpec:
        state = self._sessions
        with state.lock:
            if state.idle:
                conversation = state.idle.pop()
            else:
                conversation = _Conversation(state.made)
                state.made += 1
            state.out[index] = conversation
        # (drawn from the conversation and turn alone: the same requests whatever order users run in)
        rng = random.Random(self.seed * 1_000_003 + conversation.number * 1009 + conversation.turns)
        words = words_text(_drawn(rng, *self.user), rng.randrange(1 << 30))
        conversation.messages.append(("user", f"Chat {conversation.number}, turn {conversation.turns + 1}. {words}"))
        return RequestSpec(tuple(conversation.messages), _drawn(rng, *self.answer))

    def done(self, index: int, answer: str | None, tool_calls: tuple[ToolCall, ...] = ()) -> TurnEnd | None:
        state = self._sessions
        with state.lock:
            conversation = state.out.pop(index, None)
            if conversation is None:
                return
            if answer is None:  # (no answer: the user asks something else next)
                conversation.messages.pop()
            else:
                conversation.messages.append(("assistant", answer))
                conversation.turns += 1
            if conversation.turns < self.turns:
                state.idle.append(conversation)
        return None


WEATHER_TOOL: dict[str, object] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city now.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city's name"}},
            "required": ["city"],
        },
    },
}
WEATHER_RESULT = '{"temperature_c": 21, "sky": "clear", "wind_kmh": 9}'  # (what the tool "returns", canned)
CITIES = ("Paris", "Lagos", "Lima", "Osaka", "Oslo", "Cairo", "Perth", "Quito", "Hanoi", "Denver")


@dataclass
class _ToolTurn:
    number: int
    question: str
    calls: tuple[ToolCall, ...] = ()
    answer: str = ""  # (text the server gave beside its tool call)
    sent: float = 0.0
    busy_s: float = 0.0  # (the turn's requests' time: a follow-up's wait for its arrival slot is not the server's)


class _ToolState:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending: list[_ToolTurn] = []  # (the tool called: its result to send)
        self.out: dict[int, _ToolTurn] = {}
        self.made = 0


@dataclass(frozen=True)
class ToolLoops(Workload):
    """Users whose chat calls a tool, as an agent does: a turn asks something with `tools` (get_weather);
    an answer that calls it is followed by the conversation again with that call and the tool's result
    (canned), whose answer is the final one — the user's next request (in an open loop, the next
    arrival). An answer in text ends the turn at once, as does a second call (no loop for ever). Every
    HTTP request is a request of the run; a turn that got its final answer is a TurnEnd on that request's
    result (the summary's `tools`)."""

    seed: int = 0
    max_tokens: int = 200
    _state: _ToolState = field(default_factory=_ToolState, repr=False, compare=False)

    def request(self, index: int) -> RequestSpec:
        state = self._state
        with state.lock:
            if state.pending:
                turn = state.pending.pop()
            else:
                number = state.made
                state.made += 1
                city = random.Random(self.seed * 1_000_003 + number).choice(CITIES)
                turn = _ToolTurn(number, f"Question {number}: what is the weather in {city} now?")
            state.out[index] = turn
        messages: list[Message] = [("user", turn.question)]
        if turn.calls:
            messages.append(
                {
                    "role": "assistant",
                    "content": turn.answer,
                    "tool_calls": [
                        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                        for c in turn.calls
                    ],
                }
            )
            messages += [{"role": "tool", "tool_call_id": c.id, "content": WEATHER_RESULT} for c in turn.calls]
        turn.sent = time.perf_counter()
        return RequestSpec(tuple(messages), self.max_tokens, tools=(WEATHER_TOOL,), ignore_eos=False)

    def done(self, index: int, answer: str | None, tool_calls: tuple[ToolCall, ...] = ()) -> TurnEnd | None:
        state = self._state
        with state.lock:
            turn = state.out.pop(index, None)
            if turn is None:
                return None
            turn.busy_s += time.perf_counter() - turn.sent
            if answer is None:  # (failed: that user asks a new question next; the failure is the request's)
                return None
            if tool_calls and not turn.calls:
                turn.calls, turn.answer = tool_calls, answer
                state.pending.append(turn)
                return None
            return TurnEnd(called_tool=bool(turn.calls), seconds=turn.busy_s)


# A long document pasted into a chat while others are chatting (the `document-lands` workload): 1,200
# common words, 1,236 tokens in SmolLM2's vocabulary — within the 2,048 a slot of a 4,096-token server
# with 2 slots holds.
LANDING_WORDS = 1200


SCENARIOS = {
    "multiturn": "users who each keep a conversation (6 turns, each request the conversation so far)",
    "document-lands": "the chat load, and one long document (1,200 words) pasted in mid-run",
    "tools": "users whose chat calls a tool (get_weather) and sends its result back before the answer",
}


def workload_for(name: str, count: int = 200, seed: int = 0) -> Workload:
    """A shipped shape or scenario by name, or a ShareGPT file by its path."""
    if name in SHAPES:
        return synthetic(name, count, seed)
    if name == "multiturn":
        return ChatSessions(name, SCENARIOS[name], (), seed=seed)
    if name == "tools":
        return ToolLoops(name, SCENARIOS[name], (), seed=seed)
    if name == "document-lands":
        chat = synthetic("chat", count, seed)
        document = f"Summarise this document. {words_text(LANDING_WORDS, seed * 7 + 5)}"
        return replace(chat, name=name, description=SCENARIOS[name], landing=RequestSpec((("user", document),), 64))
    path = Path(name).expanduser()
    if path.suffix.lower() == ".json" or path.exists():
        return sharegpt(path)
    return synthetic(name, count, seed)  # (the error naming the shapes)
