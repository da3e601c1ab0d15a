"""Load and sampling parameters: one declarative table (name, type, default, range, description) from
which engine validation, settings, the GUI's spin boxes and the CLI flags are all derived.

The load parameters of the table are the fields of one record, `LoadOptions`: `LoadConfig` is those
plus the model's path, and a model's saved load settings (model_settings.json, the ⚙ dialog) are those
too; the CLI's load flags are made from the same table."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ember_chat.engine.errors import InvalidParameter

KV_CACHE_TYPES = ("f16", "q8_0", "q4_0")
RESPONSE_FORMATS = ("text", "json_object", "json_schema")  # OpenAI's response_format types


def default_threads() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def _num(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: everything a validator, a settings file, a widget or a CLI flag needs.

    `kind` is int or float (a number in low..high), bool (a switch: low 0, high 1) or str (one of
    `choices`; low and high unused)."""

    name: str
    kind: type
    default: Any
    low: float
    high: float
    label: str
    description: str
    step: float = 1
    optional: bool = False  # None is allowed (seed: None means random)
    choices: tuple[str, ...] = ()

    @property
    def numeric(self) -> bool:
        return self.kind in (int, float)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def noun(self) -> str:
        """The label inside a sentence: "temperature", "context length", but "GPU layers"."""
        label = self.label
        return label if label[1:2].isupper() else label[:1].lower() + label[1:]

    def check(self, value: object, show: Callable[[Any], str] = repr) -> None:
        """Raises InvalidParameter unless `value` is valid; `show` writes a wrong switch or choice (the
        JSON files show theirs as JSON)."""
        if value is None and self.optional:
            return
        if self.kind is bool:
            if not isinstance(value, bool):
                raise InvalidParameter(f"{self.name} must be true or false, got {show(value)}.")
            return
        if self.choices:
            if value not in self.choices:
                raise InvalidParameter(f"{self.noun} must be one of {', '.join(self.choices)}, got {show(value)}.")
            return
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            raise InvalidParameter(f"{self.noun} must be a number, got {value!r}.")
        if self.kind is int and not isinstance(value, int):
            raise InvalidParameter(f"{self.noun} must be a whole number, got {value!r}.")
        if not self.low <= value <= self.high:
            bounds = f"between {_num(self.low)} and {_num(self.high)}"
            raise InvalidParameter(f"{self.noun} must be {bounds}, got {_num(value)}.")


SAMPLING_SPECS: tuple[ParamSpec, ...] = (
    ParamSpec("temperature", float, 0.7, 0.0, 5.0, "Temperature",
              "Randomness of sampling (0: greedy, always the most likely token).", 0.05),
    ParamSpec("top_k", int, 40, 0, 100_000, "Top-k", "Sample among the k most likely tokens (0: all)."),
    ParamSpec("top_p", float, 0.95, 0.0, 1.0, "Top-p", "Sample among the most likely tokens covering this probability.",
              0.01),
    ParamSpec("min_p", float, 0.05, 0.0, 1.0, "Min-p",
              "Drop tokens less likely than this fraction of the most likely one.", 0.01),
    ParamSpec("repeat_penalty", float, 1.0, 0.5, 3.0, "Repeat penalty", "Penalty for repeated tokens (1: off).", 0.05),
    ParamSpec("max_tokens", int, 1024, 1, 1_000_000, "Max tokens", "Maximum answer length in tokens."),
    ParamSpec("seed", int, None, 0, 2**31 - 1, "Seed", "Random seed, for reproducible answers (empty: random).",
              optional=True),
)  # fmt: skip
# In the order of the load settings dialog. A parameter added here, with its field in LoadOptions below
# (tests/app/test_params_table.py holds the two equal), is then a value of model_settings.json, a widget of
# the load settings dialog and a CLI flag, with no other list to extend.
LOAD_SPECS: tuple[ParamSpec, ...] = (
    ParamSpec("n_ctx", int, 4096, 256, 1_048_576, "Context length",
              "Context window in tokens (applies when a model is loaded).", 1024),
    ParamSpec("gpu_layers", int, 0, -1, 100_000, "GPU layers", "Layers offloaded to the GPU (-1: all)."),
    ParamSpec("threads", int, default_threads(), 1, 1024, "Threads", "CPU threads for inference."),
    ParamSpec("threads_batch", int, None, 1, 1024, "Prompt threads",
              "CPU threads for evaluating the prompt (it can use more than decoding)", optional=True),
    ParamSpec("n_batch", int, 512, 1, 65_536, "Batch size", "Prompt tokens evaluated per batch."),
    ParamSpec("parallel", int, 4, 1, 16, "Parallel sequences",
              "Chats and API requests decoded together (1: one at a time)"),
    ParamSpec("kv_cache_type", str, "f16", 0, 0, "KV cache type",
              "f16 is exact; q8_0 halves the cache, q4_0 quarters it (needs flash attention)",
              choices=KV_CACHE_TYPES),
    ParamSpec("flash_attn", bool, True, 0, 1, "Flash attention",
              "On: answers do not change when conversations are decoded together; needed for a quantized KV cache"),
    ParamSpec("use_mmap", bool, True, 0, 1, "Memory-map the file (mmap)",
              "Load the weights on demand from the file; off: read them all at once"),
    ParamSpec("use_mlock", bool, False, 0, 1, "Keep the weights in RAM (mlock)",
              "Never let the system swap the weights out"),
)  # fmt: skip
SPECS: dict[str, ParamSpec] = {s.name: s for s in SAMPLING_SPECS + LOAD_SPECS}


SPECULATIVE_MODES = ("off", "auto", "ngram", "draft")


@dataclass(frozen=True)
class SamplingParams:
    """How tokens are chosen. Temperature 0 is exact greedy decoding (argmax of the logits).

    The defaults bend no logits at temperature 0: repeat penalty 1.0 is off, and top-k/top-p/min-p
    only act when sampling at temperature > 0.
    """

    temperature: float = SPECS["temperature"].default
    top_k: int = SPECS["top_k"].default
    top_p: float = SPECS["top_p"].default
    min_p: float = SPECS["min_p"].default
    repeat_penalty: float = SPECS["repeat_penalty"].default
    seed: int | None = SPECS["seed"].default
    max_tokens: int = SPECS["max_tokens"].default
    stop: tuple[str, ...] = ()
    # Reasoning models whose chat template has a switch (Qwen3's `enable_thinking`): True / False,
    # or None for the template's own default.
    thinking: bool | None = None
    # Generate exactly max_tokens: end-of-generation tokens do not stop it (benchmarks; the
    # `ignore_eos` of llama.cpp's server and vLLM).
    ignore_eos: bool = False
    # Structured output: GBNF text that constrains the answer (engine/inference/grammar/structured.py makes it from
    # a JSON schema or OpenAI's response_format); None: free text.
    grammar: str | None = None
    # OpenAI's response_format ({"type": "json_object"} or {"type": "json_schema", "json_schema": {...}}):
    # a local model gets its grammar (when `grammar` is not given), a remote server gets it as it is.
    response_format: dict[str, Any] | None = None
    # OpenAI's penalties (-2 to 2; 0: off), on tokens already in the recent context: presence once per
    # token seen, frequency by how often it was seen. API requests' options, not a window setting.
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    # Log-probabilities of the answer's tokens, with this many most likely alternatives at each
    # (0 to 20); None: not computed. An API request's option.
    logprobs: int | None = None
    # OpenAI's logit_bias: (token id, bias from -100 to 100) pairs added to the logits before sampling;
    # -100 bans the token (its logit becomes -inf), 100 practically forces it. An API request's option,
    # read from the wire by openai/chat_request.py; the local runtime checks the ids against its vocabulary.
    logit_bias: tuple[tuple[int, float], ...] = ()
    # Speculative decoding: "ngram" drafts tokens from the prompt and answer so far and verifies them
    # several at a time (inference/llama/speculative.py: the same tokens, faster when the answer copies
    # its input; sampled answers keep their distribution); "draft" drafts with the draft model loaded with the model
    # (LoadConfig.draft_model; n-grams without one); "auto" (the default) drafts (with the draft model when
    # one is loaded) and stops for an answer where it does not pay; "off" never.
    speculative: str = "auto"

    def __post_init__(self) -> None:
        for spec in SAMPLING_SPECS:
            spec.check(getattr(self, spec.name))
        if self.thinking is not None and not isinstance(self.thinking, bool):
            raise InvalidParameter(f"thinking must be true, false or null, got {self.thinking!r}.")
        if not isinstance(self.ignore_eos, bool):
            raise InvalidParameter(f"ignore_eos must be true or false, got {self.ignore_eos!r}.")
        if not isinstance(self.stop, list | tuple) or not all(isinstance(s, str) for s in self.stop):
            raise InvalidParameter("stop must be a list of strings.")
        if any(not s for s in self.stop):
            raise InvalidParameter("stop strings must not be empty.")
        object.__setattr__(self, "stop", tuple(self.stop))
        # (whether llama.cpp can parse it is checked where it is used: inference/grammar/structured.py)
        if self.grammar is not None and (not isinstance(self.grammar, str) or not self.grammar.strip()):
            raise InvalidParameter("grammar must be GBNF text with a root rule, or null.")
        for name in ("presence_penalty", "frequency_penalty"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not -2.0 <= value <= 2.0:
                raise InvalidParameter(f"{name.replace('_', ' ')} must be between -2 and 2, got {value!r}.")
        lp = self.logprobs
        if lp is not None and (isinstance(lp, bool) or not isinstance(lp, int) or not 0 <= lp <= 20):
            raise InvalidParameter(f"logprobs must be a number of alternatives from 0 to 20, or null, got {lp!r}.")
        rf = self.response_format
        if rf is not None and (
            not isinstance(rf, dict) or rf.get("type") not in ("text", "json_object", "json_schema")
        ):
            raise InvalidParameter('response_format must be {"type": "text" | "json_object" | "json_schema", ...}.')
        object.__setattr__(self, "logit_bias", _checked_logit_bias(self.logit_bias))
        if self.speculative not in SPECULATIVE_MODES:
            raise InvalidParameter(
                f"speculative must be one of {', '.join(SPECULATIVE_MODES)}, got {self.speculative!r}."
            )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stop"] = list(self.stop)
        if not self.ignore_eos:  # a benchmark's request option, not a chat setting: saved chats stay as they were
            del d["ignore_eos"]
        for name in ("grammar", "response_format", "logprobs"):  # (saved chats without them stay as they were)
            if d[name] is None:
                del d[name]
        if self.speculative == "auto":  # (the default: saved chats without it stay as they were)
            del d["speculative"]
        if self.logit_bias:
            d["logit_bias"] = [list(pair) for pair in self.logit_bias]
        else:
            del d["logit_bias"]
        for name in ("presence_penalty", "frequency_penalty"):
            if not d[name]:
                del d[name]
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SamplingParams:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise InvalidParameter(f"unknown sampling parameter(s): {', '.join(sorted(unknown))}.")
        values = dict(data)
        if "stop" in values and isinstance(values["stop"], list):
            values["stop"] = tuple(values["stop"])
        return cls(**values)


MAX_LOGIT_BIAS = 1024  # entries of a logit_bias (each is a write into the logits before every token)


def _checked_logit_bias(raw: object) -> tuple[tuple[int, float], ...]:
    """`raw` (pairs, or a dict of token id → bias) as sorted (id, bias) pairs; InvalidParameter unless
    every id is a whole number from 0 and every bias a number from -100 to 100, at most MAX_LOGIT_BIAS."""
    items = raw.items() if isinstance(raw, dict) else raw
    if not isinstance(items, list | tuple) and not isinstance(raw, dict):
        raise InvalidParameter("logit_bias must be pairs of a token id and a bias.")
    pairs: dict[int, float] = {}
    for item in items:
        if not isinstance(item, list | tuple) or len(item) != 2:
            raise InvalidParameter("logit_bias must be pairs of a token id and a bias.")
        token, bias = item
        if isinstance(token, bool) or not isinstance(token, int) or token < 0:
            raise InvalidParameter(f"logit_bias: a token id must be a whole number from 0, got {token!r}.")
        if isinstance(bias, bool) or not isinstance(bias, int | float) or not -100 <= bias <= 100:
            raise InvalidParameter(f"logit_bias: the bias of token {token} must be from -100 to 100, got {bias!r}.")
        pairs[token] = float(bias)
    if len(pairs) > MAX_LOGIT_BIAS:
        raise InvalidParameter(f"logit_bias has {len(pairs):,} tokens; at most {MAX_LOGIT_BIAS:,} are allowed.")
    return tuple(sorted(pairs.items()))


# What a chat keeps of its settings (the side panel's Parameters: ParamsPanel.to_dict): the sampling
# parameters, the stop strings, the thinking wish, the answer's JSON format, speculative decoding and its
# context length.
CHAT_SETTINGS = (
    *(s.name for s in SAMPLING_SPECS),
    *("stop", "thinking", "response_format", "speculative", "context_length"),
)


def chat_settings(data: object) -> tuple[dict[str, Any], list[str]]:
    """A chat's saved settings as far as they are valid, and the names of those dropped: each is kept
    only when it is one of CHAT_SETTINGS, of its type and in its range (context_length as the load
    parameter n_ctx). A chat file from anyone, or an older Ember's database, may hold anything: a chat
    opens with the default for each dropped one instead of failing."""
    if not isinstance(data, dict):
        return {}, []
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for name, value in data.items():
        try:
            if name == "context_length":
                SPECS["n_ctx"].check(value)
            elif name in CHAT_SETTINGS:
                SamplingParams(**{name: value})  # (its own checks: type, range, a list of non-empty strings)
            else:
                raise InvalidParameter(f"unknown chat setting {name!r}")
        except (InvalidParameter, TypeError, ValueError, OverflowError):
            dropped.append(str(name))
            continue
        kept[name] = value
    return kept, dropped


@dataclass(frozen=True, kw_only=True)
class LoadOptions:
    """How a model is loaded: one field for each load parameter of the table (same names, defaults from
    it). LoadConfig adds the model's path; a model's saved load settings are LoadOptions too."""

    n_ctx: int = SPECS["n_ctx"].default
    gpu_layers: int = SPECS["gpu_layers"].default
    threads: int = field(default_factory=default_threads)
    threads_batch: int | None = SPECS["threads_batch"].default  # None: the same as `threads`
    n_batch: int = SPECS["n_batch"].default
    parallel: int = SPECS["parallel"].default  # sequences decoded together (the context has one more: seq 0)
    kv_cache_type: str = SPECS["kv_cache_type"].default
    flash_attn: bool = SPECS["flash_attn"].default
    use_mmap: bool = SPECS["use_mmap"].default
    use_mlock: bool = SPECS["use_mlock"].default  # keep the weights in RAM (never swapped out)

    def options(self) -> dict[str, Any]:
        """The load parameters by name, as the table names them."""
        return {spec.name: getattr(self, spec.name) for spec in LOAD_SPECS}


@dataclass(frozen=True)
class LoadConfig(LoadOptions):
    """How a local GGUF model is loaded into llama.cpp (the local kind of model reference):
    `LoadConfig(path, n_ctx=..., ...)`. `mmproj`: the model's multimodal projector file (images);
    None: the one found beside the model, if any (engine/models/projector.py). `draft_model`: a smaller
    model with the same vocabulary that drafts tokens for speculative decoding (inference/llama/draft_model.py;
    refused with the reason, the model loading without it, when it cannot be used)."""

    path: Path
    mmproj: Path | None = None
    draft_model: Path | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))
        for name in ("mmproj", "draft_model"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, Path(getattr(self, name)))
        for spec in LOAD_SPECS:
            spec.check(getattr(self, spec.name))
        if self.kv_cache_type != "f16" and not self.flash_attn:
            raise InvalidParameter(
                f"A quantized KV cache ({self.kv_cache_type}) needs flash attention: "
                "turn flash attention on or use an f16 KV cache."
            )
