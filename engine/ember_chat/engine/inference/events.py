"""The typed events every generation yields, in order:
[TemplateFallback], [ContextTrimmed], [Retrying]*, PromptReady, PrefillProgress*,
(Token | ToolCallWriting | ToolCallParsed)*, Finished."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ember_chat.engine.core.tools import InvalidCall, ToolCall
from ember_chat.engine.inference.metrics import GenerationMetrics

if TYPE_CHECKING:
    from ember_chat.engine.attachments.turn_plan import TurnPlan
    from ember_chat.engine.core.logprobs import TokenLogprob


@dataclass(frozen=True)
class ContextTrimmed:
    """The oldest turns were left out so the conversation fits the context window."""

    dropped_messages: int
    prompt_tokens: int
    n_ctx: int


@dataclass(frozen=True)
class TemplateFallback:
    """The model's chat template could not render this conversation; Ember rendered it another way
    (`message` says how, for the user)."""

    message: str


@dataclass(frozen=True)
class PromptReady:
    """The prompt is tokenized and its evaluation starts now (`t_ns`, perf_counter_ns)."""

    prompt_tokens: int
    prompt_tokens_reused: int
    n_ctx: int
    t_start_ns: int
    t_ns: int
    restored: int = 0  # of prompt_tokens_reused, those brought back from a saved KV snapshot


@dataclass(frozen=True)
class PrefillProgress:
    """A long prompt is evaluated in chunks: `done` of `total` prompt tokens so far (only those not
    reused from the KV cache)."""

    done: int
    total: int
    t_ns: int


@dataclass(frozen=True)
class StepWanted:
    """Internal to the engine thread: a batched run waits for the batch decoder's next step (the caller
    calls the backend's `step()` once for all waiting runs, then resumes it). Never reaches a sink."""


@dataclass(frozen=True)
class Token:
    """One sampled token. `text` may be empty while an incomplete UTF-8 sequence or a possible
    stop string is held back; append it, never assume it is a whole character."""

    text: str
    index: int
    t_ns: int
    count: int = 1  # tokens this text stands for: several in a remote chunk, 0 for held-back text
    thinking: bool = False  # the token is part of the model's thinking (see reasoning.py)
    logprob: TokenLogprob | None = None  # when the request asked for log-probabilities (local models)


@dataclass(frozen=True)
class ToolCallWriting:
    """A tool call being written (a local model's: its text is in no Token), as it grows: the tool's
    name once written whole ("" before) and its arguments' text so far (partial JSON, as written). Each
    replaces the one before; the call's ToolCallParsed ends them. `index`: as that ToolCallParsed's."""

    index: int
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolCallParsed:
    """A tool call the model made, read whole from its answer (the call's text is not in any Token).
    `index`: its position among this answer's calls (0, 1, …). An `InvalidCall` must not run: it is
    shown and its error given back to the model."""

    index: int
    call: ToolCall | InvalidCall


@dataclass(frozen=True)
class Finished:
    """Always last. `reason`: stop (end of turn), length (max tokens), stop_string, cancelled,
    context_full, tool_calls (the turn ended with calls: `tool_calls`, as ToolCallParsed gave them),
    interrupted (a remote stream broke after tokens arrived: `text` keeps them and `error` says what
    happened). `text`: the answer without its calls."""

    reason: str
    text: str
    metrics: GenerationMetrics
    error: str | None = None
    tool_calls: tuple[ToolCall | InvalidCall, ...] = ()


@dataclass(frozen=True)
class Retrying:
    """A remote server refused the request before any token (429, 5xx, unreachable); Ember tries
    again after `delay_s` seconds (attempt `attempt` of `attempts`)."""

    attempt: int
    attempts: int
    delay_s: float
    reason: str


Event = (
    TemplateFallback
    | ContextTrimmed
    | Retrying
    | PromptReady
    | PrefillProgress
    | Token
    | ToolCallWriting
    | ToolCallParsed
    | Finished
)


@dataclass(frozen=True)
class AttachmentsPlanned:
    """How this turn's attachments went into the prompt (sent by the engine service before the prompt
    is evaluated): `plan.items` says, per file, its tokens and `whole` or `retrieval` (with passages
    used of total), `plan.sources` the passages given. `budget_tokens`: what the attachments could
    take; `estimated`: the token counts are estimates (no tokenizer for this model)."""

    plan: TurnPlan
    budget_tokens: int
    estimated: bool = False


class FilePassage(Protocol):
    """A passage of a project's file: the file, the page (1-based PDF page, None for a file without
    pages) and position in it the passage comes from, its text. What an index's passage, a retrieval hit
    (projects/retrieval.py) and an answer's cited source (`CitedPassage`) have in common."""

    @property
    def file_path(self) -> str: ...
    @property
    def page(self) -> int | None: ...
    @property
    def seq(self) -> int: ...
    @property
    def text(self) -> str: ...


class CitedPassage(FilePassage, Protocol):
    """A passage of an answer's knowledge block (projects/citations.py `ProjectSource`): its number `n` in
    the block (the [n] an answer cites it with), and its id in the project's index."""

    @property
    def n(self) -> int: ...
    @property
    def passage_id(self) -> int: ...


@dataclass(frozen=True)
class KnowledgeUsed:
    """The knowledge this answer was given (sent by the engine service before the prompt is evaluated,
    after AttachmentsPlanned): `sources`, numbered from 1 as the prompt's block has them; `retrieved`: the
    passages retrieval found, of which `left_out` did not fit `budget_tokens` (the context left once the
    conversation and its attachments are counted); `estimated`: no tokenizer, the counts are estimates.
    `name`: whose knowledge (the project's name). `ranked_by`: how the passages were ranked ("bm25", then
    "vectors" when the project's embedding model searched them, "reranker" when its reranker reordered
    them); `problems`: why a model the project names was not used, a sentence each."""

    name: str
    sources: tuple[CitedPassage, ...]
    retrieved: int
    budget_tokens: int
    estimated: bool = False
    ranked_by: tuple[str, ...] = ("bm25",)
    problems: tuple[str, ...] = ()

    @property
    def left_out(self) -> int:
        return max(0, self.retrieved - len(self.sources))

    def summary(self) -> str:
        """One line for the user: what was used, and what did not fit."""
        used = f"{len(self.sources)} passage{'' if len(self.sources) == 1 else 's'} from “{self.name}”"
        if not self.retrieved:
            return f"No passage of “{self.name}” matches this question."
        if self.left_out:
            return f"{used} in the prompt; {self.left_out} more found did not fit the context."
        return f"{used} in the prompt."
