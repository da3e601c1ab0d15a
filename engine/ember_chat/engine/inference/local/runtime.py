"""The local runtime: owns one `llama_cpp.Llama`, loads and unloads it, and generates events.

One runtime is used by one thread; only `request_stop()` may be called from another thread.
"""

from __future__ import annotations

import ctypes
import random
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

import llama_cpp

from ember_chat.engine.core.embeddings import EmbeddingInput, Embeddings, Ranking
from ember_chat.engine.core.infill import Infill
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.core.reasoning import MarkerNormalizer
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.core.states import StopReason
from ember_chat.engine.core.tools import ToolRequest
from ember_chat.engine.errors import ContextOverflowError, InvalidParameter, NoModelLoaded
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.inference.calls.turn import ToolTurn
from ember_chat.engine.inference.events import ContextTrimmed, Event, Finished, TemplateFallback
from ember_chat.engine.inference.grammar.structured import params_grammar
from ember_chat.engine.inference.llama.draft_model import DraftModel, draft_for
from ember_chat.engine.inference.llama.embeddings import Embedder
from ember_chat.engine.inference.llama.loader import NULL_ABORT, gpu_backend_name, open_llama, probe_gguf
from ember_chat.engine.inference.llama.log import route_llama_log
from ember_chat.engine.inference.local import embeddings
from ember_chat.engine.inference.local.cache import ContextCache
from ember_chat.engine.inference.local.infill import infill_tokens, read_fim_tokens
from ember_chat.engine.inference.local.prompts import ChatPrompt, chat_prompt, model_template, tool_turn_for
from ember_chat.engine.inference.local.runs import RunStarter
from ember_chat.engine.inference.local.token_stream import StreamSetup, TokenSource, stream_events
from ember_chat.engine.inference.metrics import MetricsRecorder, RunContext
from ember_chat.engine.inference.prompt.control_text import ControlText
from ember_chat.engine.inference.prompt.fitting import FitStopped
from ember_chat.engine.inference.prompt.templates import ChatMessage, ChatTemplate
from ember_chat.engine.models.gguf_inspect import ModelInfo, inspect_gguf
from ember_chat.engine.models.names import display_name

if TYPE_CHECKING:  # vision.py loads libmtmd: imported once a model has a projector
    from ember_chat.engine.inference.kv.snapshots import SnapshotStore
    from ember_chat.engine.inference.llama.vision import VisionContext, VisionPrompt


class Recent(NamedTuple):
    """A recent generation's prompt text + generated text, and the token ids behind them."""

    text: str
    tokens: list[int]
    special: bool  # a chat's (its template's markers parsed) or a completion's (plain text) tokens


class LocalRuntime:
    # chat(trim=False) is understood: a conversation that does not fit fails instead of losing its
    # oldest turns (the engine service passes it only to backends that say so)
    trims_history = True
    # chat/complete/infill(client=...) are understood: a request drafts from its own client's recent
    # answers alone (answer_ngrams.py; the engine service passes it only to backends that say so)
    takes_client = True

    def __init__(self) -> None:
        self._llm: llama_cpp.Llama | None = None
        self._info: ModelInfo | None = None
        self._config: LoadConfig | None = None
        self._backend = "CPU"
        # What a person calls the loaded model (models/names.py): its description, its runs' metrics
        # and its messages say it; the engine service sets the library's name for it after a load.
        self.label = ""
        # Prompt text + generated text of the last conversations' generations (newest first, single
        # path and batched alike), and the token ids behind them, so a follow-up whose prompt extends
        # one of those texts reuses exactly the tokens already in the KV cache (or in its snapshot) —
        # if it is tokenized the same way: a completion's text never reuses a chat's control tokens,
        # nor a chat's template markers a completion's plain text.
        self._recent: list[Recent] = []
        self._vocab: llama_cpp.llama_vocab_p | None = None
        self._pieces: dict[int, bytes] = {}  # each token's text, looked up once per loaded model
        self._byte_ids: dict[int, int] = {}  # byte -> the token that is that byte alone (found when needed)
        self._templates: dict[str | None, ChatTemplate] = {}  # per override, for the loaded model
        self._control: ControlText | None = None  # the loaded model's control tokens, read once
        self._vision: VisionContext | None = None  # the model's projector, if loaded with one
        self._draft: DraftModel | None = None  # the draft model loaded with it (speculative decoding), if any
        self._draft_refused: str | None = None  # why the draft model its config names was not loaded
        self._cache = ContextCache()  # snapshots and batch slots
        self._runs = RunStarter(self._cache)  # starts and stops the token sources
        # embeddings' own context on the loaded weights (made on the first embedding, freed with the model),
        # so embedding never touches the generation's KV cells, slots or snapshots
        self._embedder: Embedder | None = None

    @property
    def snapshots(self) -> SnapshotStore | None:
        """The KV snapshot store conversations are saved to and restored from (None: none kept)."""
        return self._cache.snapshots

    @snapshots.setter
    def snapshots(self, store: SnapshotStore | None) -> None:
        self._cache.set_snapshots(store)

    # ----- state
    @property
    def loaded(self) -> bool:
        return self._llm is not None

    @property
    def model_info(self) -> ModelInfo | None:
        return self._info

    def _named_info(self) -> ModelInfo:
        """The loaded model's header, named as people know it (what its messages say)."""
        assert self._info is not None
        return replace(self._info, name=self.label or self._info.name)

    @property
    def config(self) -> LoadConfig | None:
        return self._config

    @property
    def description(self) -> ModelDescription | None:
        if self._info is None or self._config is None or self._llm is None:
            return None
        info = self._info
        return ModelDescription(
            name=self.label or info.name,
            backend=self._backend,
            n_ctx=self._llm.n_ctx(),
            architecture=info.architecture,
            quantization=info.quantization,
            parameter_count=info.parameter_count,
            has_chat_template=info.chat_template is not None,
            threads=self._config.threads,
            gpu_layers=self._config.gpu_layers,
            path=self._config.path,
            thinking_switch=self.template().thinking_switch,
            kv_cache_type=self._config.kv_cache_type,
            vision=self._vision is not None,
            kind=info.kind,
            draft_model=self._draft.name if self._draft is not None else None,
            draft_refused=self._draft_refused,
        )

    @property
    def vision(self) -> VisionContext | None:
        return self._vision

    @property
    def backend(self) -> str:
        return self._backend

    @property
    def n_ctx(self) -> int:
        return self._require().n_ctx()

    def _require(self) -> llama_cpp.Llama:
        if self._llm is None:
            raise NoModelLoaded("No model is loaded. Pick a model first.")
        return self._llm

    # ----- load / unload
    def load(
        self,
        config: ModelRef,
        progress: Callable[[float], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> ModelDescription:
        """Inspect, then load the model. Raises ModelFileError, ModelLoadError or LoadCancelled. The
        model loaded so far is unloaded only once the new file passed its checks (header, llama.cpp's
        vocab_only read): a damaged file leaves it loaded."""
        if not isinstance(config, LoadConfig):
            raise InvalidParameter("The local runtime loads GGUF files; a remote model needs a connection.")
        info = inspect_gguf(config.path)
        probe_gguf(config.path)
        if info.kind != "chat" and info.context_length and config.n_ctx > info.context_length:
            # an encoder reads at most what it was trained on (a longer context only costs memory, and
            # llama.cpp warns): an input longer than that is refused by name, not embedded past it
            config = replace(config, n_ctx=info.context_length)
        self.close()
        route_llama_log()

        llm = open_llama(config, progress, cancel)
        try:
            from ember_chat.engine.inference.llama.vision import open_projector

            self._vision = open_projector(llm, config)
            self._draft, self._draft_refused = draft_for(llm, config, cancel)  # (a refused one: reported)
        except BaseException:
            self.close()  # (the projector, if opened)
            llm.close()
            raise
        self._runs.draft = self._draft
        self._llm = llm
        self._info = info
        self.label = display_name(config.path.name)
        self._config = config
        self._vocab = llama_cpp.llama_model_get_vocab(llm.model)
        self._pieces = {}
        self._byte_ids = {}
        self._cache.opened(llm, config)
        gpu = gpu_backend_name()
        self._backend = gpu if gpu and config.gpu_layers != 0 else "CPU"
        description = self.description
        assert description is not None
        return description

    def close(self) -> None:
        """Unload the model and free its memory now (not at garbage collection), once every
        conversation's KV state was saved to the snapshot store (if any) and the store flushed."""
        if self._llm is not None:
            self._cache.closing(self._llm)
        vision, self._vision = self._vision, None
        if vision is not None:
            vision.close()
        embedder, self._embedder = self._embedder, None
        if embedder is not None:  # (before the model its context is made on)
            embedder.close()
        draft, self._draft, self._runs.draft, self._draft_refused = self._draft, None, None, None
        if draft is not None:
            draft.close()
        llm, self._llm = self._llm, None
        self._info = None
        self._config = None
        self._recent = []
        self._vocab = None
        self._pieces = {}
        self._byte_ids = {}
        self._templates.clear()
        self._control = None
        if llm is not None:
            llama_cpp.llama_set_abort_callback(llm.ctx, NULL_ABORT, None)
            llm.close()

    def reset_cache(self) -> None:
        """Forget the KV cache, so the next prompt is evaluated from scratch (benchmarks, tests)."""
        llm = self._require()
        if self._cache.decoder is not None:
            self._cache.decoder.evict_all()
        self._cache.forget_seq0()
        llm.reset()
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(llm.ctx), True)  # (every sequence's cells)
        self._recent = []
        if self._cache.answers is not None:  # (a benchmark's answer is not drafted from the last round's)
            self._cache.answers.clear()

    def forget_conversations(self) -> None:
        """Chats were deleted for good: every conversation the context holds (seq 0, the batch slots), the
        texts kept for prefix reuse and the images' embeddings are dropped without being saved to the
        snapshot store; the next prompt is evaluated (its images encoded) from scratch (engine thread,
        between generations)."""
        self._recent = []
        self._cache.forget_all()
        if self._vision is not None:
            self._vision.forget()

    def kv_cells_used(self) -> int:
        """KV cells held now by every sequence (seq 0 and the batch slots); 0 with no model. Engine
        thread only: the engine service publishes it for other threads (EngineService.kv_cells)."""
        return self._cache.cells_used()

    # ----- batched decoding
    @property
    def batch_slots(self) -> int:
        """How many generations can be decoded together: the loaded config's `parallel` for API and other
        clients and one more kept for the window's chat (the engine service never gives it to another
        client); 1 with `parallel` 1 (one generation at a time, nothing batched); 0 with no model."""
        if self._llm is None:
            return 0
        return self._cache.parallel + 1 if self._cache.parallel > 1 else 1

    def can_batch(self, params: SamplingParams, tools: ToolRequest | None, messages: list[ChatMessage] | None) -> bool:
        """Whether a request can be a batched run: plain text only (tools, a grammar or response format,
        log-probabilities and images keep llama-cpp-python's single path)."""
        if self._llm is None or self.batch_slots < 1 or tools is not None or params.logprobs is not None:
            return False
        if params.grammar is not None or (params.response_format or {"type": "text"}).get("type") != "text":
            return False
        return not any(m.images for m in messages or ())

    def step(self) -> None:
        """One step of the batch decoder: a token for every generating run, prompt chunks for the others."""
        if self._cache.decoder is not None:
            self._cache.decoder.step()

    # ----- generation
    def request_stop(self) -> None:
        """Stop the running generation (thread-safe): within one token while decoding, and promptly
        during prompt evaluation via llama.cpp's abort callback."""
        self._runs.request_stop()

    def tokenize(self, text: str, *, special: bool = False, add_bos: bool = False) -> list[int]:
        return self._require().tokenize(text.encode("utf-8"), add_bos=add_bos, special=special)

    def template(self, override: str | None = None) -> ChatTemplate:
        """The chat template for the loaded model (built once per override, not per message)."""
        llm = self._require()
        assert self._info is not None
        if override not in self._templates:
            if self._control is None:  # (the whole vocabulary read: once per loaded model, when first needed)
                self._control = ControlText.of_model(llm.model)
            self._templates[override] = model_template(llm, self._info, override, self._control)
        return self._templates[override]

    def _prompt_tokens(self, text: str, *, special: bool, guard: ControlText | None = None) -> list[int]:
        """`text`'s tokens (`special`: control tokens' text parsed, except what `guard`'s sentinels stand
        for), reusing the tokens of a recent generation whose text it extends."""
        llm = self._require()

        def tokenize(part: str) -> list[int]:
            if special and guard is not None:
                return guard.tokens(part, lambda t, parsed: self.tokenize(t, special=parsed))
            return self.tokenize(part, special=special)

        known = [h for h in self._recent if h.special == special and text.startswith(h.text)]
        if known:
            prev = max(known, key=lambda h: len(h.text))
            return prev.tokens + tokenize(text[len(prev.text) :])
        tokens = tokenize(text)
        bos = llm.token_bos()
        if llm._model.add_bos_token() and bos >= 0 and (not tokens or tokens[0] != bos):
            tokens.insert(0, bos)
        return tokens

    def chat_prompt(
        self,
        messages: list[ChatMessage],
        params: SamplingParams,
        template_override: str | None = None,
        tools: ToolRequest | None = None,
        *,
        trim: bool = True,
        stopped: Callable[[], bool] = lambda: False,
        fit: bool = True,
    ) -> ChatPrompt:
        """The prompt `chat` evaluates for `messages`: rendered with the model's template, the text of the
        messages, files and tools kept from becoming control tokens (control_text.py), fitted to the
        context (`trim` as for `chat`; FitStopped when `stopped()` while fitting). `fit` False: the whole
        conversation whatever its size (a count of it: a client deciding whether to shorten it wants the
        number, not an error). Its images, if any, are the caller's to close."""
        llm = self._require()
        assert self._info is not None
        template = self.template(template_override)
        n_ctx = llm.n_ctx() if fit else sys.maxsize  # (no context is too small for a count)
        return chat_prompt(
            messages, params, tools, template, self._named_info(), self._vision,
            lambda text: self._prompt_tokens(text, special=True, guard=template.guard),
            n_ctx, trim=trim and fit, stopped=stopped, byte_tokens=self._byte_tokens,
        )  # fmt: skip

    def chat(
        self,
        messages: list[ChatMessage],
        params: SamplingParams,
        template_override: str | None = None,
        tools: ToolRequest | None = None,
        *,
        batched: bool = False,
        cancel: threading.Event | None = None,
        trim: bool = True,
        client: str = "",
    ) -> Iterator[Event]:
        """Generate the assistant's reply to `messages`. The last message is the user's, the results of
        the calls of the assistant turn before (`tool` messages), or an assistant's partial answer to
        continue (after an interruption). With `tools`, the answer may be calls (see calls/turn.py).
        `batched` (only when `can_batch`): decoded with the other batched runs; the events include
        StepWanted whenever it waits for `step()`. `cancel`: stops this run only. `trim`: the oldest
        turns are left out when the conversation does not fit (ContextTrimmed says so); False:
        HistoryTooLong instead. A stop while the conversation is being fitted ends it as cancelled.
        `client`: who asked (GenerationRequest.client): speculation drafts from that client's recent
        answers alone (answer_ngrams.py)."""
        llm = self._require()
        if batched and not self.can_batch(params, tools, messages):
            raise InvalidParameter("This request cannot be decoded with others (tools, grammar, images, logprobs).")
        recorder = MetricsRecorder(self._run_context())
        assert self._info is not None
        stops = self._runs.stops

        def stopped() -> bool:  # (request_stop() since this run began, or its own cancel)
            return self._runs.stops != stops or (cancel is not None and cancel.is_set())

        try:
            chat = self.chat_prompt(messages, params, template_override, tools, trim=trim, stopped=stopped)
        except FitStopped:
            yield Finished(StopReason.CANCELLED, "", recorder.finish(StopReason.CANCELLED))
            return
        if stopped():  # (after the last render: starting the run would clear the stop)
            if chat.vision is not None:
                chat.vision.close()
            yield Finished(StopReason.CANCELLED, "", recorder.finish(StopReason.CANCELLED))
            return
        recorder.dropped_messages = chat.dropped
        if chat.notice:
            yield TemplateFallback(chat.notice)
        if chat.dropped:
            yield ContextTrimmed(chat.dropped, len(chat.tokens), llm.n_ctx())
        markers = chat.markers()
        try:
            turn = tool_turn_for(self._named_info(), template_override, tools, markers) if chat.offered else None
            yield from self._stream(
                chat.text, chat.tokens, params, recorder, markers, chat.vision, turn,
                batched=batched, cancel=cancel, held=chat.held, special=True, client=client,
            )  # fmt: skip
        finally:
            if chat.vision is not None:
                chat.vision.close()

    def complete(
        self,
        prompt: str,
        params: SamplingParams,
        *,
        batched: bool = False,
        cancel: threading.Event | None = None,
        client: str = "",
    ) -> Iterator[Event]:
        """Continue raw text (notebook mode, for base models); `batched`, `cancel` and `client` as for `chat`."""
        llm = self._require()
        if batched and not self.can_batch(params, None, None):
            raise InvalidParameter("This request cannot be decoded with others (grammar, logprobs).")
        recorder = MetricsRecorder(self._run_context())
        tokens = self._prompt_tokens(prompt, special=False)
        if len(tokens) >= llm.n_ctx():
            raise ContextOverflowError(
                f"The prompt is {len(tokens):,} tokens but the context holds {llm.n_ctx():,}. "
                "Shorten it or load the model with a longer context."
            )
        yield from self._stream(
            prompt, tokens, params, recorder, batched=batched, cancel=cancel, special=False, client=client
        )

    def infill(
        self,
        infill: Infill,
        params: SamplingParams,
        *,
        batched: bool = False,
        cancel: threading.Event | None = None,
        client: str = "",
    ) -> Iterator[Event]:
        """Write the middle between `infill`'s prefix and suffix with the model's fill-in-the-middle
        tokens (infill.py); `batched`, `cancel` and `client` as for `chat`. InvalidParameter for a model that has
        none, ContextOverflowError for a prompt the context cannot hold."""
        llm = self._require()
        fim = read_fim_tokens(self._vocab)
        if fim is None:
            raise InvalidParameter(
                f"The model {self.label or llm.model_path} cannot fill in the middle: its vocabulary has no "
                "fill-in-the-middle tokens (tokenizer.ggml.fim_pre_token_id, fim_suf_token_id and fim_mid_token_id)."
            )
        if batched and not self.can_batch(params, None, None):
            raise InvalidParameter("This request cannot be decoded with others (grammar, logprobs).")
        bos = llm.token_bos()
        tokens = infill_tokens(
            fim,
            infill,
            lambda t: self.tokenize(t) if t else [],
            bos if llm._model.add_bos_token() and bos >= 0 else None,
        )
        if len(tokens) >= llm.n_ctx():
            raise ContextOverflowError(
                f"The prefix, suffix and files are {len(tokens):,} tokens but the context holds {llm.n_ctx():,}. "
                "Shorten them or load the model with a longer context."
            )
        # conversation=False: no text-keyed reuse of these tokens by a later completion (their text is
        # not the prompt's), no snapshot of seq 0
        recorder = MetricsRecorder(self._run_context())
        yield from self._stream(
            "", tokens, params, recorder, batched=batched, cancel=cancel, conversation=False, special=False,
            client=client,
        )  # fmt: skip

    def embed(self, inputs: list[EmbeddingInput], stopped: Callable[[], bool] = lambda: False) -> Embeddings:
        """Each input's unit-length vector (texts tokenized as llama-cpp-python's `Llama.embed` does), the
        model's pooling or mean (local/embeddings.py), several inputs per decode, in a context of their own
        that is made on the first call. BadEmbeddingInput names an input that is empty, has a token outside
        the vocabulary or is longer than the loaded context or batch size; InvalidParameter for a reranker."""
        llm = self._require()
        assert self._config is not None
        limit = min(llm.n_ctx(), self._config.n_batch)
        tokens = embeddings.input_tokens(inputs, lambda t: self.tokenize(t, add_bos=True), llm.n_vocab(), limit)
        if self._embedder is None:
            threads = self._config.threads
            self._embedder = Embedder(llm, limit, threads, self._config.threads_batch or threads)
        return embeddings.embed(self._embedder, tokens, stopped)

    def rerank(self, query: str, documents: list[str], stopped: Callable[[], bool] = lambda: False) -> Ranking:
        """A reranker's score of each document against `query` (each pair joined as llama-server's /rerank
        joins it: local/embeddings.pair_tokens), several pairs per decode in the embeddings context.
        BadEmbeddingInput names a document whose pair is longer than the context or batch size;
        InvalidParameter for a model that is not a reranker."""
        llm = self._require()
        assert self._config is not None
        limit = min(llm.n_ctx(), self._config.n_batch)
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        template = llama_cpp.llama_model_chat_template(llm.model, b"rerank")
        eos = llama_cpp.llama_vocab_eos(vocab)
        if eos == llama_cpp.LLAMA_TOKEN_NULL:
            eos = llama_cpp.llama_vocab_sep(vocab)
        fmt = embeddings.PairFormat(
            template=template.decode("utf-8") if template else None,
            bos=llama_cpp.llama_vocab_bos(vocab) if llama_cpp.llama_vocab_get_add_bos(vocab) else None,
            eos=eos if llama_cpp.llama_vocab_get_add_eos(vocab) else None,
            sep=llama_cpp.llama_vocab_sep(vocab) if llama_cpp.llama_vocab_get_add_sep(vocab) else None,
        )
        pairs = embeddings.pair_tokens(query, documents, fmt, lambda t, special: self.tokenize(t, special=special),
                                       limit)  # fmt: skip
        if self._embedder is None:
            threads = self._config.threads
            self._embedder = Embedder(llm, limit, threads, self._config.threads_batch or threads)
        return embeddings.rank(self._embedder, pairs, stopped)

    def run_tokens(self, tokens: list[int], params: SamplingParams) -> Iterator[Event]:
        """Evaluate exactly these prompt tokens and generate exactly `params.max_tokens` tokens (the
        benchmark lab): no template, no BOS added, end-of-generation tokens do not stop it."""
        llm = self._require()
        if len(tokens) + params.max_tokens > llm.n_ctx():
            raise ContextOverflowError(
                f"{len(tokens):,} prompt + {params.max_tokens:,} generated tokens do not fit the context of "
                f"{llm.n_ctx():,}. Load the model with a longer context."
            )
        exact = replace(params, ignore_eos=True)
        yield from self._stream("", tokens, exact, MetricsRecorder(self._run_context()), conversation=False)

    def vocab_size(self) -> int:
        return int(self._require().n_vocab())

    def token_piece(self, token: int) -> bytes:
        """A token's bytes (control tokens keep their text); part of a character for some tokens."""
        self._require()
        return self._piece(token)

    def _run_context(self) -> RunContext:
        llm = self._require()
        assert self._info is not None and self._config is not None
        return RunContext(
            model=self.label or self._info.name,
            quantization=self._info.quantization,
            backend=self._backend,
            threads=self._config.threads,
            gpu_layers=self._config.gpu_layers,
            n_ctx=llm.n_ctx(),
        )

    def _piece(self, token: int) -> bytes:
        """The token's text (bytes: a piece may be part of a UTF-8 character), remembered: a call into
        llama.cpp releases the GIL, and with several streams at once each release is a wait for it."""
        piece = self._pieces.get(token)
        if piece is None:
            piece = self._pieces[token] = self._token_piece(token)
        return piece

    def _byte_tokens(self, data: bytes) -> list[int]:
        """The tokens that are these bytes one by one (a byte-fallback vocabulary's <0xD8>, a byte-level
        BPE's single-byte tokens), or [] when the vocabulary lacks one. Tokenizing the bytes would not
        do: llama.cpp reads an incomplete character in a BPE vocabulary as U+FFFD. The vocabulary is
        read in id order until the bytes are found (byte tokens come first in both kinds)."""
        self._require()
        wanted = set(data) - self._byte_ids.keys()
        if wanted:
            for token in range(self.vocab_size()):
                piece = self._token_piece(token)
                if len(piece) == 1 and piece[0] not in self._byte_ids and not self._is_control(token):
                    self._byte_ids[piece[0]] = token
                    wanted.discard(piece[0])
                    if not wanted:
                        break
        if any(b not in self._byte_ids for b in data):
            return []
        return [self._byte_ids[b] for b in data]

    def _is_control(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_control(self._vocab, token))

    def _token_piece(self, token: int) -> bytes:
        buf = ctypes.create_string_buffer(64)
        # special=True: control tokens keep their text (thinking markers such as <think> or gpt-oss's
        # channel headers are control tokens; without it they would vanish and the thoughts run
        # into the answer). End-of-generation tokens get here only with `ignore_eos` (benchmarks).
        n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, 64, 0, True)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, -n, 0, True)
        return buf.raw[:n]

    def _stream(
        self,
        prompt_text: str,
        tokens: list[int],
        params: SamplingParams,
        rec: MetricsRecorder,
        markers: MarkerNormalizer | None = None,
        vision: VisionPrompt | None = None,
        turn: ToolTurn | None = None,
        conversation: bool = True,
        batched: bool = False,
        cancel: threading.Event | None = None,
        held: bytes = b"",
        special: bool = True,
        client: str = "",
    ) -> Iterator[Event]:
        """`markers`: chat mode, where a reasoning model's thinking markers are put in canonical form.
        `params.ignore_eos`: exactly max_tokens tokens (benchmarks, as llama-bench generates them).
        `vision`: the prompt's images (its `tokens` hold placeholders where they go). `conversation`:
        seq 0's state may be saved to and restored from snapshots (not a benchmark's, nor with images).
        `batched`: a run of the batch decoder (plain text only); `cancel` stops this run alone. `held`:
        the prompt ends with these bytes of an unfinished character (an answer being continued).
        `special`: the prompt's text was tokenized as a chat's (True) or a completion's (False), which a
        later prompt must match to reuse its tokens. `client`: whose recent answers it drafts from."""
        llm = self._require()
        seed = params.seed if params.seed is not None else random.randrange(2**31)
        # (checked: a grammar llama.cpp cannot parse never reaches its sampler)
        grammar = turn.first_grammar() if turn is not None else params_grammar(params)
        source: TokenSource
        if batched:
            source, stopped = self._runs.batch_run(tokens, params, seed, cancel, client)
        else:
            source, stopped = self._runs.seq0_run(
                llm, tokens, params, seed, self._vision, vision, conversation, cancel, self._piece, client
            )

        def remember(reason: str, raw: str, all_tokens: list[int]) -> None:
            # (with images, the text alone does not say which image is where: no text-keyed reuse; a
            # benchmark's tokens are no conversation's prefix)
            if reason != StopReason.STOP_STRING and vision is None and conversation:
                self._recent = [Recent(prompt_text + raw, all_tokens, special), *self._recent[:7]]

        setup = StreamSetup(
            tokens, params, rec, seed, llm.n_ctx(), self._piece, self._is_eog, stopped,
            grammar, markers, turn, remember, held,
        )  # fmt: skip
        yield from stream_events(source, setup)

    def _is_eog(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self._vocab, token))
