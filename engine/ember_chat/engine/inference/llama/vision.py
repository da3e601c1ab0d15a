"""Images through llama.cpp's multimodal library (`llama_cpp.mtmd_cpp`, libmtmd) for a model loaded
with its projector (mmproj) file, inside Ember's own generation loop.

The chat template renders the text with a media marker where each image goes, and the text is cut
there into mtmd's text and image parts (`mtmd_tokenize_from_parts`), which it turns into text chunks
and image chunks. The marker is drawn at random for each prompt: no message, file or tool result can
spell it (with a fixed one, text spelling it made every image turn of its chat fail), and it is never
tokenized, so the prompt's tokens do not depend on it. The prompt becomes one list of positions: text tokens as
they are, and an image's positions filled with a placeholder id derived from the image's sha256
(negative, never a real token). KV-cache prefix reuse then works as for text (`common_prefix` against
what llama-cpp-python's `Llama.input_ids` holds): the same image at the same place is the same prefix,
another image is not. `prefill` evaluates the positions not reused: text with `Llama.eval`, images
by decoding their embeddings with `mtmd_helper_decode_image_chunk` (which knows each projector's
attention and positions); Ember's loop then generates as usual from the last text token.

An image's embedding is cached by sha256, so a follow-up question about it decodes the cached
embedding without encoding the image again; `encode_ms` is the time spent encoding in one prefill.
"""

from __future__ import annotations

import ctypes
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import llama_cpp
import numpy as np
from llama_cpp import mtmd_cpp as mtmd

from ember_chat.engine.core.messages import ChatMessage, ImageInput
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.core.tools import ToolSpec
from ember_chat.engine.errors import EmberError, GenerationError, InvalidParameter, ModelLoadError
from ember_chat.engine.inference.events import PrefillProgress
from ember_chat.engine.inference.llama.log import route_mtmd_log
from ember_chat.engine.inference.prompt.control_text import ControlText
from ember_chat.engine.inference.prompt.templates import ChatTemplate, render_chat
from ember_chat.engine.models.projector import find_projector

log = logging.getLogger(__name__)

CACHED_IMAGES = 32  # embeddings kept (a 256-token image of a 2560-wide model is 2.6 MB)


def placeholder_id(sha256: str) -> int:
    """The id an image's positions carry in the prompt's token list: negative (never a token),
    the same for the same image."""
    return -1 - int(sha256[:7], 16)


@dataclass
class ImageSpan:
    start: int  # first position in the prompt
    n_pos: int  # positions it takes (its token count, except for M-RoPE models)
    sha256: str
    chunk: mtmd.mtmd_input_chunk_p


@dataclass
class VisionPrompt:
    """A tokenized multimodal prompt; owns its mtmd chunks until `close()`."""

    tokens: list[int]
    spans: list[ImageSpan]
    _chunks: mtmd.mtmd_input_chunks_p | None = field(default=None, repr=False)

    def close(self) -> None:
        chunks, self._chunks = self._chunks, None
        if chunks:
            mtmd.mtmd_input_chunks_free(chunks)

    def align(self, reused: int) -> int:
        """`reused` moved back to the start of an image it would cut through."""
        for span in self.spans:
            if span.start < reused < span.start + span.n_pos:
                return span.start
        return reused


def media_marker() -> str:
    """A marker of where an image goes that no text of the conversation holds (64 random bits)."""
    return f"<__media_{secrets.token_hex(8)}__>"


def with_markers(messages: list[ChatMessage], marker: str) -> list[ChatMessage]:
    """The messages with each image replaced by the media marker, before the text (as a user puts a
    picture above a question): the images then come in the prompt in message order."""
    return [ChatMessage(m.role, marker * len(m.images) + "\n" + m.content) if m.images else m for m in messages]


def open_projector(llm: llama_cpp.Llama, config: LoadConfig) -> VisionContext | None:
    """The projector named in the config (its failure fails the load), or the one found beside the
    model (its failure is logged: the model still works for text)."""
    path = config.mmproj or find_projector(config.path)
    if path is None:
        return None
    try:
        return VisionContext(llm, path, config.threads, use_gpu=config.gpu_layers != 0)
    except EmberError as exc:
        if config.mmproj is not None:
            raise
        log.warning("%s; %s is loaded for text only", exc, config.path.name)
        return None


class VisionContext:
    """One mtmd context for one loaded model (created after the model, freed before it)."""

    def __init__(self, llm: llama_cpp.Llama, mmproj: Path, threads: int, use_gpu: bool) -> None:
        route_mtmd_log()
        params = mtmd.mtmd_context_params_default()
        params.use_gpu = use_gpu
        params.n_threads = threads
        params.print_timings = False
        ctx = mtmd.mtmd_init_from_file(str(mmproj).encode(), llm.model, params)
        if not ctx:
            raise ModelLoadError(
                f"The projector {mmproj.name} could not be loaded with this model: it may belong to "
                "another model, be damaged, or need a newer llama.cpp. See the log for details."
            )
        if not mtmd.mtmd_support_vision(ctx):
            mtmd.mtmd_free(ctx)
            raise ModelLoadError(f"{mmproj.name} is not an image projector (it has no vision encoder).")
        self._ctx = ctx
        self.path = mmproj
        self._n_embd = int(llama_cpp.llama_model_n_embd_inp(llm.model))
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.encodes = 0  # images encoded since load (a cached one is not encoded again)
        self.encode_ms = 0.0  # in the last prefill

    def forget(self) -> None:
        """Drop the embeddings of the images seen (chats were deleted for good: nothing of them stays)."""
        self._cache.clear()

    def close(self) -> None:
        ctx, self._ctx = self._ctx, None
        self._cache.clear()
        if ctx:
            mtmd.mtmd_free(ctx)

    # ----- tokenizing
    def prompt(
        self,
        template: ChatTemplate,
        messages: list[ChatMessage],
        fallback: ChatTemplate,
        thinking: bool | None,
        prefix: str,
        tools: list[ToolSpec] | None = None,
    ) -> tuple[str, VisionPrompt, str | None]:
        """The chat's prompt text (`prefix`: an answer being continued, defused), its positions, and
        the template's fallback notice: the template renders a media marker where each image goes."""
        marker = media_marker()
        rendered, notice = render_chat(template, with_markers(messages, marker), fallback, thinking, tools)
        text = rendered + prefix
        images = [img for m in messages for img in m.images]
        return text, self.tokenize(text, images, marker, template.guard), notice

    def tokenize(
        self, text: str, images: list[ImageInput], marker: str, guard: ControlText | None = None
    ) -> VisionPrompt:
        """Split `text` (with one `marker` per image) into positions: the text between markers with
        special tokens parsed, except what `guard`'s sentinels stand for (content that looks like
        control tokens, as plain text). Raises InvalidParameter for an image llama.cpp cannot read or a
        marker count that does not match (a template that leaves a message out or writes it twice)."""
        pieces = text.split(marker)
        if len(pieces) != len(images) + 1:
            raise InvalidParameter(
                "The images could not be placed in the prompt: the chat template left out or repeated a "
                "message that has one."
            )
        bitmaps = [self._bitmap(img) for img in images]
        chunks = mtmd.mtmd_input_chunks_init()
        prompt = VisionPrompt([], [], chunks)
        try:
            # one part per text piece (parsed or not) and per image: mtmd adds each model's own image
            # begin and end markers around the images, and joins text parts that follow each other
            keep: list[object] = []  # the parts point into these
            parts: list[object] = []
            for i, piece in enumerate(pieces):
                for part_text, special in guard.parts(piece) if guard is not None else [(piece, True)]:
                    raw = part_text.encode("utf-8")
                    if not raw:
                        continue
                    inp = mtmd.mtmd_input_text(raw, len(raw), False, special)
                    keep += [raw, inp]
                    parts.append(mtmd.mtmd_input_part(ctypes.pointer(inp), None))
                if i < len(bitmaps):
                    parts.append(mtmd.mtmd_input_part(None, bitmaps[i]))
            arr = (ctypes.POINTER(mtmd.mtmd_input_part) * max(1, len(parts)))(*(ctypes.pointer(p) for p in parts))
            rc = mtmd.mtmd_tokenize_from_parts(self._ctx, chunks, arr, len(parts), True)
            if rc != 0:
                raise InvalidParameter(f"The images could not be placed in the prompt (mtmd error {rc}).")
            for i in range(mtmd.mtmd_input_chunks_size(chunks)):
                chunk = mtmd.mtmd_input_chunks_get(chunks, i)
                kind = mtmd.mtmd_input_chunk_get_type(chunk)
                if kind == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
                    n = ctypes.c_size_t(0)
                    ptr = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
                    prompt.tokens.extend(int(ptr[j]) for j in range(n.value))
                elif kind == mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE:
                    sha = (mtmd.mtmd_input_chunk_get_id(chunk) or b"").decode()
                    n_pos = int(mtmd.mtmd_input_chunk_get_n_pos(chunk))
                    prompt.spans.append(ImageSpan(len(prompt.tokens), n_pos, sha, chunk))
                    prompt.tokens.extend([placeholder_id(sha)] * n_pos)
                else:
                    raise InvalidParameter("Only images are supported here, not audio.")
        except BaseException:
            prompt.close()
            raise
        finally:
            for bitmap in bitmaps:
                mtmd.mtmd_bitmap_free(bitmap)
        if prompt.spans and prompt.spans[-1].start + prompt.spans[-1].n_pos == len(prompt.tokens):
            prompt.close()
            raise InvalidParameter("A prompt cannot end with an image: the chat template must follow it with text.")
        return prompt

    def _bitmap(self, image: ImageInput) -> mtmd.mtmd_bitmap_p:
        buf = (ctypes.c_uint8 * len(image.data)).from_buffer_copy(image.data)
        bitmap = mtmd.mtmd_helper_bitmap_init_from_buf(self._ctx, buf, len(image.data), False)
        if not bitmap:
            raise InvalidParameter(
                f"{image.name or 'The image'} could not be read as an image (PNG, JPEG, WebP, GIF, BMP)."
            )
        mtmd.mtmd_bitmap_set_id(bitmap, image.sha256.encode())
        return bitmap

    # ----- evaluating
    def prefill(
        self, llm: llama_cpp.Llama, prompt: VisionPrompt, reused: int, stopped: Callable[[], bool]
    ) -> Iterator[PrefillProgress]:
        """Evaluate positions `reused` .. len-2 of the prompt (the last text token is left to
        `Llama.generate`, which finds the rest in the KV cache), with progress after each piece."""
        self.encode_ms = 0.0
        tokens = prompt.tokens
        end = len(tokens) - 1
        llm.n_tokens = reused  # eval and the image decode go on from here
        llm._ctx.kv_cache_seq_rm(-1, reused, -1)
        todo = end - reused
        pos = reused
        batch = max(1, llm.n_batch)
        for span in [*(s for s in prompt.spans if s.start >= reused), None]:
            text_end = end if span is None else span.start
            while pos < text_end and not stopped():
                piece = tokens[pos : min(text_end, pos + batch)]
                llm.eval(piece)
                pos += len(piece)
                yield PrefillProgress(pos - reused, todo, time.perf_counter_ns())
            if span is None or stopped():
                return
            embd = self._embedding(span)
            new_n_past = llama_cpp.llama_pos(0)
            rc = mtmd.mtmd_helper_decode_image_chunk(
                self._ctx,
                llm.ctx,
                span.chunk,
                embd.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                pos,
                0,
                batch,
                ctypes.byref(new_n_past),
                mtmd.mtmd_helper_post_decode_callback(0),
                None,
            )
            if rc != 0:
                raise GenerationError(f"llama.cpp failed to evaluate an image (error {rc}).")
            llm.input_ids[pos : pos + span.n_pos] = placeholder_id(span.sha256)
            pos += span.n_pos
            llm.n_tokens = pos
            yield PrefillProgress(pos - reused, todo, time.perf_counter_ns())

    def _embedding(self, span: ImageSpan) -> np.ndarray:
        cached = self._cache.get(span.sha256)
        if cached is not None:
            self._cache.move_to_end(span.sha256)
            return cached
        t0 = time.perf_counter_ns()
        rc = mtmd.mtmd_encode_chunk(self._ctx, span.chunk)
        if rc != 0:
            raise GenerationError(f"llama.cpp failed to encode an image (error {rc}).")
        n = int(mtmd.mtmd_input_chunk_get_n_tokens(span.chunk)) * self._n_embd
        out = mtmd.mtmd_get_output_embd(self._ctx)
        embd = np.ctypeslib.as_array(out, shape=(n,)).copy()
        self.encode_ms += (time.perf_counter_ns() - t0) / 1e6
        self.encodes += 1
        self._cache[span.sha256] = embd
        while len(self._cache) > CACHED_IMAGES:
            self._cache.popitem(last=False)
        return embd
