"""The GGUF inspector: correct facts for good files, a typed error for every kind of bad one."""

from __future__ import annotations

import struct
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ember_chat.engine.errors import ModelFileError
from ember_chat.engine.models.gguf_inspect import inspect_gguf
from tests.helpers.gguf_factory import TinySpec, write_tiny_bert, write_tiny_model

GGUF_MAGIC = b"GGUF"


def test_tiny_model_facts(tiny_model: Path) -> None:
    info = inspect_gguf(tiny_model)
    assert info.architecture == "llama"
    assert info.name == "Tiny Test"
    assert info.layers == 2 and info.heads == 4 and info.kv_heads == 2
    assert info.embedding_size == 64 and info.context_length == 2048
    assert info.has_chat_template and "<|im_start|>" in (info.chat_template or "")
    assert info.quantization == "F32"
    assert info.file_size == tiny_model.stat().st_size
    # embeddings + output + per-layer weights + norms, from the factory's shapes
    n_vocab = 5 + 256 + 34
    per_layer = 64 * 64 * 2 + 32 * 64 * 2 + 128 * 64 * 3 + 64 * 2
    assert info.parameter_count == n_vocab * 64 * 2 + 64 + 2 * per_layer


def test_starter_model_facts(starter_model: Path) -> None:
    info = inspect_gguf(starter_model)
    assert info.architecture == "gemma3"
    assert info.quantization == "Q4_K_M"
    assert info.layers == 18 and info.heads == 4 and info.kv_heads == 1
    assert info.context_length == 32768
    assert not info.has_chat_template
    assert info.license == "gemma"
    assert 260e6 < info.parameter_count < 280e6


def test_file_type_falls_back_to_dominant_tensor_type(tmp_path: Path) -> None:
    info = inspect_gguf(write_tiny_model(tmp_path / "m.gguf", TinySpec(file_type=None)))
    assert info.quantization == "F32"
    info = inspect_gguf(write_tiny_model(tmp_path / "q.gguf", TinySpec(file_type=15)))
    assert info.quantization == "Q4_K_M"


def test_which_models_give_a_texts_vector(tmp_path: Path, tiny_model: Path) -> None:
    """An encoder embeds, a reranker does not (it scores), a chat model does not, unless its GGUF asks for a
    pooling (a Qwen3-Embedding is a qwen3 with last-token pooling)."""
    encoder = inspect_gguf(write_tiny_bert(tmp_path / "bert.gguf"))
    ranker = inspect_gguf(write_tiny_bert(tmp_path / "ranker.gguf", pooling="rank"))
    chat = inspect_gguf(tiny_model)
    assert (encoder.kind, encoder.embeds) == ("embedding", True)
    assert (ranker.kind, ranker.embeds) == ("reranker", False)
    assert (chat.kind, chat.embeds) == ("chat", False)
    pooled = replace(chat, architecture="qwen3", metadata={**chat.metadata, "qwen3.pooling_type": 3})
    assert (pooled.kind, pooled.embeds) == ("chat", True)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="no such file"):
        inspect_gguf(tmp_path / "nope.gguf")


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="folder"):
        inspect_gguf(tmp_path)


def test_empty_file(tmp_path: Path) -> None:
    (tmp_path / "e.gguf").write_bytes(b"")
    with pytest.raises(ModelFileError, match="empty"):
        inspect_gguf(tmp_path / "e.gguf")


def test_random_bytes(tmp_path: Path) -> None:
    (tmp_path / "r.gguf").write_bytes(bytes(range(256)) * 40)
    with pytest.raises(ModelFileError, match="not in the GGUF format"):
        inspect_gguf(tmp_path / "r.gguf")


def test_wrong_magic(tmp_path: Path, tiny_model: Path) -> None:
    data = bytearray(tiny_model.read_bytes())
    data[:4] = b"GGML"
    (tmp_path / "w.gguf").write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="not in the GGUF format"):
        inspect_gguf(tmp_path / "w.gguf")


@pytest.mark.parametrize("keep", [4, 10, 30, 200, 2000])
def test_truncated_header(tmp_path: Path, tiny_model: Path, keep: int) -> None:
    (tmp_path / "t.gguf").write_bytes(tiny_model.read_bytes()[:keep])
    with pytest.raises(ModelFileError, match=r"truncated|damaged"):
        inspect_gguf(tmp_path / "t.gguf")


def test_truncated_tensor_data(tmp_path: Path, tiny_model: Path) -> None:
    data = tiny_model.read_bytes()
    (tmp_path / "t.gguf").write_bytes(data[: len(data) - 1000])
    with pytest.raises(ModelFileError, match="truncated"):
        inspect_gguf(tmp_path / "t.gguf")


def _header(n_tensors: int, n_kv: int) -> bytes:
    return GGUF_MAGIC + struct.pack("<IQQ", 3, n_tensors, n_kv)


def _string(s: bytes) -> bytes:
    return struct.pack("<Q", len(s)) + s


def test_absurd_counts(tmp_path: Path) -> None:
    (tmp_path / "a.gguf").write_bytes(_header(2**60, 2**62) + b"\0" * 64)
    with pytest.raises(ModelFileError, match="absurd"):
        inspect_gguf(tmp_path / "a.gguf")


def test_absurd_string_length(tmp_path: Path) -> None:
    body = _header(0, 1) + struct.pack("<Q", 2**62) + b"general.architecture"
    (tmp_path / "s.gguf").write_bytes(body)
    with pytest.raises(ModelFileError, match="impossible string length"):
        inspect_gguf(tmp_path / "s.gguf")


def test_absurd_array_length(tmp_path: Path) -> None:
    kv = _string(b"tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 2**50)
    (tmp_path / "arr.gguf").write_bytes(_header(0, 1) + kv + b"\0" * 100)
    with pytest.raises(ModelFileError, match="impossible array length"):
        inspect_gguf(tmp_path / "arr.gguf")


def test_unsupported_architecture(tmp_path: Path) -> None:
    kv = _string(b"general.architecture") + struct.pack("<I", 8) + _string(b"clip")
    (tmp_path / "c.gguf").write_bytes(_header(0, 1) + kv)
    with pytest.raises(ModelFileError, match="architecture 'clip'"):
        inspect_gguf(tmp_path / "c.gguf")
    kv = _string(b"general.architecture") + struct.pack("<I", 8) + _string(b"made-up-arch")
    (tmp_path / "u.gguf").write_bytes(_header(0, 1) + kv)
    with pytest.raises(ModelFileError, match="made-up-arch"):
        inspect_gguf(tmp_path / "u.gguf")


def test_unreadable_file(tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests run as root, where file permissions do not stop reads; simulate the OS refusing.
    def refuse(self: Path, *args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "open", refuse)
    with pytest.raises(ModelFileError, match="cannot be read"):
        inspect_gguf(tiny_model)


@pytest.fixture(scope="module")
def header_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = write_tiny_model(tmp_path_factory.mktemp("fuzz") / "base.gguf")
    return path.read_bytes()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_headers_give_a_result_or_the_typed_error(
    data: st.DataObject, header_bytes: bytes, tmp_path: Path
) -> None:
    buf = bytearray(header_bytes)
    header_end = 6000  # the key/values and tensor infos of the tiny model live in the first ~6 KB
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0, header_end))
        kind = data.draw(st.sampled_from(["byte", "u64", "truncate"]))
        if kind == "byte":
            buf[pos] = data.draw(st.integers(0, 255))
        elif kind == "u64":
            buf[pos : pos + 8] = struct.pack("<Q", data.draw(st.sampled_from([0, 1, 2**31, 2**63, 2**64 - 1])))
        else:
            del buf[pos:]
            break
    path = tmp_path / "fuzz.gguf"
    path.write_bytes(bytes(buf))
    try:
        info = inspect_gguf(path)
    except ModelFileError:
        return
    assert info.architecture and info.file_size == len(buf)
