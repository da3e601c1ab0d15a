"""GGUF header inspection: what a model file is, and whether it is safe to hand to llama.cpp.

The reader walks the header (key/values and tensor infos) with explicit bounds checks against the
file size, so a damaged or hostile file is a `ModelFileError` and never a huge allocation or a crash.
No tensor data is read. Type ids, enums and key names come from the `gguf` package (llama.cpp's own).
"""

from __future__ import annotations

import os
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from gguf.constants import (
    GGML_QUANT_SIZES,
    GGUF_DEFAULT_ALIGNMENT,
    GGUF_MAGIC,
    MODEL_ARCH_NAMES,
    GGMLQuantizationType,
    GGUFValueType,
    LlamaFileType,
)

from ember_chat.engine.errors import ModelFileError

# Limits far above any real model, far below anything that could exhaust memory.
MAX_KV_COUNT = 100_000
MAX_TENSOR_COUNT = 1_000_000
MAX_STRING_BYTES = 64 * 1024 * 1024
MAX_ARRAY_ITEMS = 100_000_000
MAX_DIMS = 8
KEEP_ARRAYS_UP_TO = 64  # longer arrays (vocabularies) are skipped, only their length is kept

# Architectures of embedding models (encoders): Ember serves their vectors (/v1/embeddings) or, with
# rank pooling, their scores (/v1/rerank), never a chat.
EMBEDDING_ARCHITECTURES = frozenset(
    {
        "bert",
        "eurobert",
        "gemma-embedding",
        "jina-bert-v2",
        "jina-bert-v3",
        "llama-embed",
        "modern-bert",
        "neo-bert",
        "nomic-bert",
        "nomic-bert-moe",
    }
)
# Architectures llama.cpp knows that Ember has no use for (a vision or audio part, a T5 encoder alone).
UNUSABLE_ARCHITECTURES = frozenset({"clip", "t5encoder", "wavtokenizer-dec"})
SUPPORTED_ARCHITECTURES = frozenset(MODEL_ARCH_NAMES.values()) - UNUSABLE_ARCHITECTURES
RANK_POOLING = 4  # `<arch>.pooling_type` of a reranker (llama.cpp's LLAMA_POOLING_TYPE_RANK)
EMBEDDING_POOLINGS = (1, 2, 3)  # `<arch>.pooling_type` mean, cls, last: a model that gives a text's vector
MODEL_KINDS = ("chat", "embedding", "reranker")


def model_kind(architecture: str, metadata: dict[str, object]) -> str:
    """What a model is for, from its GGUF: "reranker" when it pools by rank (a cross-encoder scoring a
    query and a document: any architecture, a Qwen3 reranker is a qwen3), "embedding" for an encoder
    architecture (bert, nomic-bert, …), else "chat" (a text-generation model)."""
    if metadata.get(f"{architecture}.pooling_type") == RANK_POOLING:
        return "reranker"
    return "embedding" if architecture in EMBEDDING_ARCHITECTURES else "chat"


_SCALAR_FORMATS: dict[GGUFValueType, str] = {
    GGUFValueType.UINT8: "<B",
    GGUFValueType.INT8: "<b",
    GGUFValueType.UINT16: "<H",
    GGUFValueType.INT16: "<h",
    GGUFValueType.UINT32: "<I",
    GGUFValueType.INT32: "<i",
    GGUFValueType.FLOAT32: "<f",
    GGUFValueType.BOOL: "<?",
    GGUFValueType.UINT64: "<Q",
    GGUFValueType.INT64: "<q",
    GGUFValueType.FLOAT64: "<d",
}


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def n_bytes(self) -> int:
        block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(self.ggml_type)]
        return self.n_elements // block * type_size


@dataclass(frozen=True)
class ModelInfo:
    """What a GGUF file holds, read from its header alone."""

    path: Path
    file_size: int
    gguf_version: int
    architecture: str
    name: str
    parameter_count: int
    quantization: str
    layers: int | None
    heads: int | None
    kv_heads: int | None
    embedding_size: int | None
    context_length: int | None
    chat_template: str | None
    license: str | None
    tensor_count: int
    metadata: dict[str, object] = field(repr=False, default_factory=dict)

    @property
    def has_chat_template(self) -> bool:
        return bool(self.chat_template)

    @property
    def kind(self) -> str:
        """What it is for: "chat", "embedding" or "reranker" (`model_kind`)."""
        return model_kind(self.architecture, self.metadata)

    @property
    def embeds(self) -> bool:
        """It gives a text's vector: an embedding model, or a decoder whose GGUF asks for a pooling (mean,
        cls, last: a Qwen3-Embedding is a `qwen3`); never a reranker."""
        if self.kind != "chat":
            return self.kind == "embedding"
        return self.metadata.get(f"{self.architecture}.pooling_type") in EMBEDDING_POOLINGS

    def summary(self) -> dict[str, object]:
        """JSON-friendly description (no template text, no metadata dump)."""
        return {
            "path": str(self.path),
            "file_size": self.file_size,
            "architecture": self.architecture,
            "kind": self.kind,
            "name": self.name,
            "parameter_count": self.parameter_count,
            "quantization": self.quantization,
            "layers": self.layers,
            "heads": self.heads,
            "kv_heads": self.kv_heads,
            "embedding_size": self.embedding_size,
            "context_length": self.context_length,
            "has_chat_template": self.has_chat_template,
            "license": self.license,
        }


class _BoundedReader:
    """Reads little-endian GGUF values, refusing to read or allocate past the end of the file."""

    def __init__(self, fh: BinaryIO, size: int, path: Path) -> None:
        self._fh = fh
        self.size = size
        self._path = path

    @property
    def pos(self) -> int:
        return self._fh.tell()

    def fail(self, what: str) -> ModelFileError:
        return ModelFileError(
            f"{self._path.name} is damaged or not a GGUF model ({what}). Download it again or choose another file."
        )

    def read(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > self.size:
            raise self.fail(f"truncated while reading {what}")
        data = self._fh.read(n)
        if len(data) != n:
            raise self.fail(f"truncated while reading {what}")
        return data

    def skip(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            raise self.fail(f"truncated while reading {what}")
        self._fh.seek(n, os.SEEK_CUR)

    def scalar(self, fmt: str, what: str) -> int | float | bool:
        return struct.unpack(fmt, self.read(struct.calcsize(fmt), what))[0]

    def u32(self, what: str) -> int:
        return int(self.scalar("<I", what))

    def u64(self, what: str) -> int:
        return int(self.scalar("<Q", what))

    def string_length(self, what: str) -> int:
        n = self.u64(what)
        if n > MAX_STRING_BYTES or self.pos + n > self.size:
            raise self.fail(f"impossible string length {n} in {what}")
        return n

    def string(self, what: str) -> str:
        raw = self.read(self.string_length(what), what)
        return raw.decode("utf-8", errors="replace")

    def value_type(self, what: str) -> GGUFValueType:
        raw = self.u32(what)
        try:
            return GGUFValueType(raw)
        except ValueError:
            raise self.fail(f"unknown value type {raw} in {what}") from None

    def value(self, vtype: GGUFValueType, what: str) -> object:
        if vtype == GGUFValueType.STRING:
            return self.string(what)
        if vtype == GGUFValueType.ARRAY:
            return self.array(what)
        return self.scalar(_SCALAR_FORMATS[vtype], what)

    def array(self, what: str) -> object:
        item_type = self.value_type(what)
        count = self.u64(what)
        if item_type == GGUFValueType.ARRAY:
            raise self.fail(f"nested array in {what}")
        item_size = 8 if item_type == GGUFValueType.STRING else struct.calcsize(_SCALAR_FORMATS[item_type])
        # Every item takes at least item_size bytes, so a count the file cannot hold is rejected
        # before any loop or allocation.
        if count > MAX_ARRAY_ITEMS or count * item_size > self.size - self.pos:
            raise self.fail(f"impossible array length {count} in {what}")
        if count <= KEEP_ARRAYS_UP_TO:
            return [self.value(item_type, what) for _ in range(count)]
        if item_type == GGUFValueType.STRING:
            self._skip_strings(count, what)
        else:
            self.skip(count * item_size, what)
        return _SkippedArray(item_type.name.lower(), count)

    def _skip_strings(self, count: int, what: str) -> None:
        """Walk `count` length-prefixed strings in memory blocks (a vocabulary has ~250k)."""
        block_size = 1 << 20
        buf = b""
        at = 0
        start = self.pos
        consumed = 0  # bytes of buf already read from the file, relative to start
        for _ in range(count):
            if at + 8 > len(buf):
                buf, at, consumed = self._refill(buf, at, consumed, start, 8 + block_size, what)
            (n,) = struct.unpack_from("<Q", buf, at)
            if n > MAX_STRING_BYTES:
                raise self.fail(f"impossible string length {n} in {what}")
            at += 8 + n
        end = start + consumed - len(buf) + at
        if end > self.size:
            raise self.fail(f"truncated while reading {what}")
        self._fh.seek(end)

    def _refill(self, buf: bytes, at: int, consumed: int, start: int, want: int, what: str) -> tuple[bytes, int, int]:
        # Keep the unread tail (at may point past buf when a string spans blocks).
        file_at = start + consumed - len(buf) + at
        if file_at + 8 > self.size:
            raise self.fail(f"truncated while reading {what}")
        self._fh.seek(file_at)
        data = self._fh.read(min(want, self.size - file_at))
        return data, 0, file_at - start + len(data)


@dataclass(frozen=True)
class _SkippedArray:
    item_type: str
    length: int


def _fail(path: Path, reason: str) -> ModelFileError:
    return ModelFileError(f"{path}: {reason}")


def inspect_gguf(path: str | os.PathLike[str]) -> ModelInfo:
    """Read a GGUF header and describe the model, or raise `ModelFileError` saying why not."""
    p = Path(path)
    if not p.exists():
        raise _fail(p, "no such file. Check the path, or pick a model from the Models menu.")
    if p.is_dir():
        raise _fail(p, "is a folder, not a .gguf model file.")
    try:
        size = p.stat().st_size
        fh = p.open("rb")
    except OSError as exc:
        raise _fail(p, f"cannot be read ({exc.strerror or exc}).") from exc
    if size == 0:
        fh.close()
        raise _fail(p, "is empty (0 bytes). The download or copy did not finish; get it again.")
    with fh:
        return _parse(_BoundedReader(fh, size, p), p, size)


def _parse(r: _BoundedReader, path: Path, size: int) -> ModelInfo:
    if size < 4 or struct.unpack("<I", r.read(4, "magic"))[0] != GGUF_MAGIC:
        raise ModelFileError(
            f"{path.name} is not a GGUF model file: what it holds is not in the GGUF format, even if its name "
            "ends in .gguf. Ember runs GGUF models; convert other formats with llama.cpp's convert_hf_to_gguf.py."
        )
    version = r.u32("version")
    if version not in (2, 3):
        raise r.fail(f"unsupported GGUF version {version}")
    n_tensors = r.u64("tensor count")
    n_kv = r.u64("key/value count")
    if n_tensors > MAX_TENSOR_COUNT or n_kv > MAX_KV_COUNT:
        raise r.fail(f"absurd header counts ({n_tensors} tensors, {n_kv} keys)")

    meta: dict[str, object] = {}
    for i in range(n_kv):
        key = r.string(f"key #{i}")
        meta[key] = r.value(r.value_type(key), key)

    tensors: list[TensorInfo] = []
    for i in range(n_tensors):
        name = r.string(f"tensor #{i} name")
        n_dims = r.u32(f"tensor {name}")
        if n_dims == 0 or n_dims > MAX_DIMS:
            raise r.fail(f"tensor {name} has {n_dims} dimensions")
        shape = tuple(r.u64(f"tensor {name}") for _ in range(n_dims))
        ggml_type = r.u32(f"tensor {name}")
        offset = r.u64(f"tensor {name}")
        try:
            block, _ = GGML_QUANT_SIZES[GGMLQuantizationType(ggml_type)]
        except (ValueError, KeyError):
            raise r.fail(f"tensor {name} has unknown type {ggml_type}") from None
        if any(d == 0 or d > 2**40 for d in shape) or shape[0] % block:
            raise r.fail(f"tensor {name} has an invalid shape {shape}")
        tensors.append(TensorInfo(name, shape, ggml_type, offset))

    alignment = meta.get("general.alignment", GGUF_DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise r.fail(f"invalid alignment {alignment!r}")
    data_start = -(-r.pos // alignment) * alignment
    for t in tensors:
        end = data_start + t.offset + t.n_bytes
        if end > size:
            raise ModelFileError(
                f"{path.name} is truncated: tensor {t.name} ends at byte {end:,} but the file has "
                f"{size:,} bytes. The download did not finish; get the file again."
            )

    arch = meta.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise r.fail("no general.architecture key")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise ModelFileError(
            f"{path.name} uses the architecture '{arch}', which Ember cannot use "
            "(not a text-generation or embedding model llama.cpp supports)."
        )

    def arch_int(key: str) -> int | None:
        v = meta.get(f"{arch}.{key}")
        if isinstance(v, list):  # per-layer head counts
            v = max((x for x in v if isinstance(x, int)), default=None)
        return int(v) if isinstance(v, int) and not isinstance(v, bool) else None

    template = meta.get("tokenizer.chat_template")
    lic = meta.get("general.license")
    name = meta.get("general.name")
    return ModelInfo(
        path=path,
        file_size=size,
        gguf_version=version,
        architecture=arch,
        name=name if isinstance(name, str) and name else path.stem,
        parameter_count=sum(t.n_elements for t in tensors),
        quantization=_quantization(meta, tensors),
        layers=arch_int("block_count"),
        heads=arch_int("attention.head_count"),
        kv_heads=arch_int("attention.head_count_kv") or arch_int("attention.head_count"),
        embedding_size=arch_int("embedding_length"),
        context_length=arch_int("context_length"),
        chat_template=template if isinstance(template, str) and template.strip() else None,
        license=lic if isinstance(lic, str) else None,
        tensor_count=len(tensors),
        metadata=meta,
    )


def _quantization(meta: dict[str, object], tensors: list[TensorInfo]) -> str:
    ftype = meta.get("general.file_type")
    if isinstance(ftype, int) and not isinstance(ftype, bool):
        try:
            return LlamaFileType(ftype).name.removeprefix("MOSTLY_").removeprefix("ALL_")
        except ValueError:
            pass
    # No file type recorded: name it after the type holding most of the weight bytes.
    by_bytes: Counter[int] = Counter()
    for t in tensors:
        by_bytes[t.ggml_type] += t.n_bytes
    if not by_bytes:
        return "unknown"
    return GGMLQuantizationType(by_bytes.most_common(1)[0][0]).name


def header_metadata_prefix(data: bytes) -> dict[str, object]:
    """Key/values readable from the first bytes of a GGUF file (e.g. a Range request to the Hub):
    architecture and shape keys come first in files written by llama.cpp's converter, so a couple of
    megabytes are enough for a fit estimate. Stops quietly where the prefix ends."""
    import io

    r = _BoundedReader(io.BytesIO(data), len(data), Path("remote.gguf"))
    meta: dict[str, object] = {}
    try:
        if struct.unpack("<I", r.read(4, "magic"))[0] != GGUF_MAGIC:
            return meta
        r.u32("version")
        r.u64("tensor count")
        n_kv = r.u64("key/value count")
        for i in range(min(n_kv, MAX_KV_COUNT)):
            key = r.string(f"key #{i}")
            meta[key] = r.value(r.value_type(key), key)
    except ModelFileError:
        pass
    return meta
