"""Issue 17: the model library and the Hub know projectors (mmproj files): a model is paired with the
projector beside it (installed, imported, in place), a repository's model is downloaded with its
projector (verified like any file), and a vision model without one says so."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.models.downloader import Downloader, DownloadSpec
from ember_chat.engine.models.hub import HubClient, HubFile, group_variants
from ember_chat.engine.models.library import ModelEntry, ModelLibrary
from ember_chat.engine.models.projector import choose_projector, find_projector
from tests.helpers.gguf_factory import TinySpec, write_tiny_model
from tests.helpers.hub_server import FakeHub
from tests.helpers.vision_factory import write_tiny_vision_model


def library(tmp_path: Path) -> ModelLibrary:
    return ModelLibrary(tmp_path / "models", hf_cache=tmp_path / "no-hf-cache")


def listed(lib: ModelLibrary) -> dict[str, ModelEntry]:
    return {e.name: e for e in lib.entries() if not e.is_starter}


def test_a_projector_beside_a_model_pairs_with_it_and_is_not_listed_as_a_model(tmp_path: Path) -> None:
    lib = library(tmp_path)
    model, mmproj = write_tiny_vision_model(lib.models_dir / "acme" / "tiny-vision-GGUF")
    lib.models_dir.mkdir(exist_ok=True)
    text = write_tiny_model(lib.models_dir / "plain.gguf", TinySpec())
    entries = listed(lib)
    assert set(entries) == {"acme/tiny-vision-GGUF/tiny-vision.gguf", "plain.gguf"}
    seeing = entries["acme/tiny-vision-GGUF/tiny-vision.gguf"]
    assert seeing.mmproj == mmproj and seeing.vision and not seeing.vision_needs_projector
    assert entries["plain.gguf"].mmproj is None and not entries["plain.gguf"].vision
    assert not entries["plain.gguf"].vision_needs_projector  # a text model needs nothing
    assert find_projector(text) is None and find_projector(model) == mmproj


def test_a_vision_model_without_its_projector_says_it_needs_one(tmp_path: Path) -> None:
    lib = library(tmp_path)
    (lib.models_dir / "sub").mkdir(parents=True)
    write_tiny_model(lib.models_dir / "qwen2-vl.gguf", TinySpec(arch="qwen2vl", name="Tiny Qwen2-VL"))
    write_tiny_model(lib.models_dir / "sub" / "Tiny-VL-Q4_K_M.gguf", TinySpec(name="Tiny-VL"))
    entries = listed(lib)
    assert entries["qwen2-vl.gguf"].vision_needs_projector
    assert entries["sub/Tiny-VL-Q4_K_M.gguf"].vision_needs_projector  # known by its name
    assert not entries["qwen2-vl.gguf"].vision


def test_an_imported_copy_takes_its_projector_along_and_in_place_finds_it(tmp_path: Path) -> None:
    model, mmproj = write_tiny_vision_model(tmp_path / "downloads")
    lib = library(tmp_path)
    copied = lib.import_file(model, copy=True)
    assert copied.mmproj is not None and copied.mmproj.read_bytes() == mmproj.read_bytes()
    assert copied.mmproj.parent == copied.path.parent  # type: ignore[union-attr]
    assert set(listed(lib)) == {copied.name}  # the projector is not a model
    lib.delete(copied.name)
    in_place = lib.import_file(model, copy=False)
    assert in_place.mmproj == mmproj and in_place.vision


def test_deleting_a_model_deletes_its_projector_unless_another_model_uses_it(tmp_path: Path) -> None:
    lib = library(tmp_path)
    folder = lib.models_dir / "acme" / "tiny-vision-GGUF"
    model, mmproj = write_tiny_vision_model(folder)
    other = folder / "tiny-vision-Q8_0.gguf"
    other.write_bytes(model.read_bytes())  # a second quantization sharing the repository's projector
    lib.delete("acme/tiny-vision-GGUF/tiny-vision.gguf")
    assert mmproj.exists() and listed(lib)["acme/tiny-vision-GGUF/tiny-vision-Q8_0.gguf"].mmproj == mmproj
    lib.delete("acme/tiny-vision-GGUF/tiny-vision-Q8_0.gguf")
    assert not mmproj.exists() and not folder.exists()  # the last one: its projector and folder went too


def test_the_runtime_loads_a_library_models_projector(tmp_path: Path) -> None:
    lib = library(tmp_path)
    write_tiny_vision_model(lib.models_dir / "acme" / "v")
    [entry] = listed(lib).values()
    rt = LocalRuntime()
    try:
        desc = rt.load(LoadConfig(entry.path, n_ctx=256, threads=1))  # type: ignore[arg-type]
        assert desc.vision
    finally:
        rt.close()


@pytest.mark.parametrize(
    ("model", "projectors", "chosen"),
    [
        ("gemma-3-4b-it-Q4_K_M.gguf", ["mmproj-model-f16.gguf"], "mmproj-model-f16.gguf"),  # ggml-org's layout
        ("m-Q4_K_M.gguf", ["mmproj-BF16.gguf", "mmproj-F16.gguf", "mmproj-F32.gguf"], "mmproj-F16.gguf"),
        (
            "Qwen2-VL-2B-Instruct-Q4_K_M.gguf",
            ["mmproj-Qwen2-VL-7B-Instruct-f16.gguf", "mmproj-Qwen2-VL-2B-Instruct-f16.gguf"],
            "mmproj-Qwen2-VL-2B-Instruct-f16.gguf",
        ),
        ("other-Q4_K_M.gguf", ["mmproj-a-f16.gguf", "mmproj-b-f16.gguf"], None),  # ambiguous: no guess
    ],
)
def test_which_projector_goes_with_a_model(model: str, projectors: list[str], chosen: str | None) -> None:
    assert choose_projector(model, projectors) == chosen


def test_a_repositorys_model_variants_carry_their_projector() -> None:
    files = [
        HubFile("m-Q4_K_M.gguf", 100, "a"),
        HubFile("m-Q8_0.gguf", 200, "b"),
        HubFile("mmproj-F16.gguf", 30, "c"),
        HubFile("mmproj-BF16.gguf", 31, "d"),
        HubFile("README.md", 1, None),
    ]
    variants = group_variants(files)
    assert [(v.name, v.mmproj.path if v.mmproj else None, v.size) for v in variants] == [
        ("m-Q4_K_M.gguf", "mmproj-F16.gguf", 130),
        ("m-Q8_0.gguf", "mmproj-F16.gguf", 230),
    ]
    assert all(v.vision and v.download_files[-1].path == "mmproj-F16.gguf" for v in variants)
    assert not group_variants([HubFile("t-Q4_0.gguf", 5, "e")])[0].vision


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[FakeHub]:
    model, mmproj = write_tiny_vision_model(tmp_path / "src")
    h = FakeHub().start()
    h.add_repo(
        "acme/tiny-vision-GGUF",
        {"tiny-vision-Q8_0.gguf": model.read_bytes(), "mmproj-tiny-vision-f16.gguf": mmproj.read_bytes()},
    )
    yield h
    h.stop()


def test_a_model_downloads_with_its_projector_verified_and_is_listed_with_vision(hub: FakeHub, tmp_path: Path) -> None:
    files = HubClient(hub.hub_url).files("acme/tiny-vision-GGUF")
    [variant] = files.variants
    assert variant.mmproj is not None and variant.mmproj.sha256 is not None
    lib = library(tmp_path)
    dl = Downloader(hub.hub_url, backoff_s=0.01)  # type: ignore[arg-type]
    for f in variant.download_files:
        path = dl.fetch(DownloadSpec(files.repo_id, f.path, files.commit, f.size, f.sha256), lib.models_dir)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == f.sha256
    [entry] = listed(lib).values()
    assert entry.name == "acme/tiny-vision-GGUF/tiny-vision-Q8_0.gguf"
    assert entry.vision and entry.mmproj is not None and entry.mmproj.name == "mmproj-tiny-vision-f16.gguf"


def test_models_list_says_vision_and_what_is_missing(tmp_path: Path) -> None:
    from tests.helpers.library_cli import cli

    env = {
        **os.environ,
        "EMBER_DATA_DIR": str(tmp_path / "data"),
        "EMBER_CONFIG_DIR": str(tmp_path / "config"),
        "HF_HOME": str(tmp_path / "hf"),
    }
    models = tmp_path / "data" / "models"
    _, mmproj = write_tiny_vision_model(models / "acme" / "v")
    (models / "q").mkdir()
    write_tiny_model(models / "q" / "qwen2-vl.gguf", TinySpec(arch="qwen2vl", name="Tiny Qwen2-VL"))
    out = cli("models", "list", "--json", env=env)
    assert out.returncode == 0, out.stderr
    rows = {m["name"]: m for m in json.loads(out.stdout)}
    assert rows["acme/v/tiny-vision.gguf"]["vision"] and rows["acme/v/tiny-vision.gguf"]["mmproj"] == str(mmproj)
    assert rows["q/qwen2-vl.gguf"]["vision_needs_projector"] and not rows["q/qwen2-vl.gguf"]["vision"]
    text = cli("models", "list", env=env).stdout
    assert "tiny-vision.gguf" in text and "  vision\n" in text and "vision needs the projector file" in text
