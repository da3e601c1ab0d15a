"""Shared fixtures. Environment isolation happens before anything imports huggingface_hub or Qt."""

from __future__ import annotations

import gc
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

_SANDBOX = Path(tempfile.mkdtemp(prefix="ember-tests-"))
os.environ.update(
    {
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
        "HF_HOME": str(_SANDBOX / "hf-home"),
        "EMBER_DATA_DIR": str(_SANDBOX / "data"),
        "EMBER_CONFIG_DIR": str(_SANDBOX / "config"),
        "QT_QPA_PLATFORM": "offscreen",
        # tests never touch the real OS keychain
        "PYTHON_KEYRING_BACKEND": "tests.helpers.file_keyring.FileTestKeyring",
        "EMBER_TEST_KEYRING": str(_SANDBOX / "keyring.json"),
    }
)


import pytest  # noqa: E402

from tests.helpers.ember_export import Place  # noqa: E402


@pytest.fixture(autouse=True)
def _garbage_collected_on_the_main_thread() -> Iterator[None]:
    """As in the app (app/qt/gc_guard.py): Python's cyclic collector never runs on a worker thread, where
    destroying the Qt objects of an earlier test's window deadlocks against the GUI thread; each test's
    garbage is collected on the main thread after it (the youngest generation holds all it made: nothing was
    collected, so nothing was promoted, while it ran; a full collection each time made the suite 70 % slower)."""
    gc.disable()
    yield
    gc.collect(0)


@pytest.fixture(autouse=True)
def _keyring_left_as_found() -> Iterator[None]:
    """Each test leaves the test keychain as it found it: a key one test saved (the window's API server key
    in test_app_remote) made a later test's server ask for it (test_remote_switch: 401)."""
    keyring_file = Path(os.environ["EMBER_TEST_KEYRING"])
    before = keyring_file.read_bytes() if keyring_file.exists() else None
    yield
    if before is None:
        keyring_file.unlink(missing_ok=True)
    else:
        keyring_file.write_bytes(before)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that runs a real starter model is slow (it loads 100-250 MB): `pytest -m "not slow"` is the
    fast inner loop; the whole suite runs them all."""
    for item in items:
        if {"starter_model", "chat_starter_model"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


from tests.helpers.gguf_factory import TinySpec, write_tiny_model  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer dim-64 llama model with a ChatML template (~0.5 MB)."""
    return write_tiny_model(tmp_path_factory.mktemp("models") / "tiny-chatml.gguf")


@pytest.fixture(scope="session")
def tiny_model_no_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = TinySpec(chat_template=None, name="Tiny Base", seed=1)
    return write_tiny_model(tmp_path_factory.mktemp("models") / "tiny-base.gguf", spec)


@pytest.fixture(scope="session")
def starter_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real Gemma 3 270M Q4_K_M base model (`gemma-3-270m`, the tests' and benchmarks' real model),
    assembled once per test session."""
    from ember_chat.engine.models.starter import GEMMA_ALIAS, starter_model_path

    return starter_model_path(tmp_path_factory.mktemp("starter"), GEMMA_ALIAS)


@pytest.fixture(scope="session")
def chat_starter_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real chat starter, SmolLM2 135M Instruct Q4_1 (`starter`), verified in place in its package."""
    from ember_chat.engine.models.starter import STARTER_ALIAS, starter_model_path

    return starter_model_path(tmp_path_factory.mktemp("chat-starter"), STARTER_ALIAS)


@pytest.fixture
def runtime() -> Iterator[object]:
    from ember_chat.engine.inference.local.runtime import LocalRuntime

    rt = LocalRuntime()
    yield rt
    rt.close()


@pytest.fixture
def places(tmp_path: Path) -> Iterator[tuple[Place, Place]]:
    a, b = Place(tmp_path / "a"), Place(tmp_path / "b")
    yield a, b
    a.store.close()
    b.store.close()
