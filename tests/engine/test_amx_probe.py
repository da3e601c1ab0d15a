"""llama.cpp's extra CPU buffers (AMX, repacked weights) are used unless they crash this machine: on a CPU
that advertises AMX, a child process decodes a batch of the model first, and a child killed by SIGILL
turns them off for every later load (measured on a cloud VM where bare llama-cpp-python died on any prompt
of more than one token)."""

from __future__ import annotations

import multiprocessing.context
import signal
import threading
from pathlib import Path

import pytest

from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.inference.events import Token
from ember_chat.engine.inference.llama import amx_probe
from ember_chat.engine.inference.llama.amx_probe import broken_mark, cpu_has_amx, extra_buffers_usable
from ember_chat.engine.inference.local.runtime import LocalRuntime


@pytest.mark.slow
@pytest.mark.skipif(not cpu_has_amx(), reason="this CPU does not advertise AMX: no probe runs")
def test_on_an_amx_cpu_the_verdict_is_a_real_decode_in_a_child(starter_model: Path, tmp_path: Path) -> None:
    usable = extra_buffers_usable(starter_model, cache_dir=tmp_path)
    assert broken_mark(tmp_path).exists() is (not usable)
    if not usable:  # asked once: the mark answers from now on, with no child
        assert extra_buffers_usable(starter_model, cache_dir=tmp_path) is False


@pytest.mark.slow
def test_a_batched_prompt_on_the_starter_does_not_kill_the_process(starter_model: Path) -> None:
    """Its prompt is evaluated in a batch of many tokens, where the AMX kernels crashed (the batch decoder:
    tests/engine/test_batch_decode.py, which crashed the same way)."""
    rt = LocalRuntime()
    rt.load(LoadConfig(starter_model, n_ctx=512, threads=2))
    try:
        prompt = "Count the animals: " + "a dog, a cat, a cow, a hen, " * 12
        events = rt.complete(prompt, SamplingParams(temperature=0.0, max_tokens=4))
        assert "".join(e.text for e in events if isinstance(e, Token))
    finally:
        rt.close()


def test_without_amx_no_child_is_started(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(amx_probe.ENV_OVERRIDE, raising=False)
    monkeypatch.setattr(amx_probe, "cpu_has_amx", lambda: False)
    monkeypatch.setattr(amx_probe, "_probe", lambda _path, _cancel: pytest.fail("a child was started"))
    assert extra_buffers_usable(tmp_path / "any.gguf", cache_dir=tmp_path) is True


@pytest.mark.parametrize(("value", "usable"), [("0", False), ("1", True)])
def test_the_environment_decides_without_a_probe(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str, usable: bool
) -> None:
    monkeypatch.setenv(amx_probe.ENV_OVERRIDE, value)
    monkeypatch.setattr(amx_probe, "_probe", lambda _path, _cancel: pytest.fail("a child was started"))
    assert extra_buffers_usable(tmp_path / "any.gguf", cache_dir=tmp_path) is usable


def test_a_probe_that_cannot_finish_decides_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Cancelled (or over its time): this load goes without the extra buffers, the next one asks again."""
    monkeypatch.delenv(amx_probe.ENV_OVERRIDE, raising=False)
    monkeypatch.setattr(amx_probe, "cpu_has_amx", lambda: True)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    asked: list[Path] = []
    monkeypatch.setattr(amx_probe, "_probe", lambda path, _cancel: asked.append(path))
    assert extra_buffers_usable(model, cache_dir=tmp_path) is False
    assert extra_buffers_usable(model, cache_dir=tmp_path) is False
    assert asked == [model, model] and not broken_mark(tmp_path).exists()


def test_a_cancelled_load_kills_its_probe(tmp_path: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    assert amx_probe._probe(model, cancel) is None  # the child was started, killed and reaped


def test_a_probe_that_cannot_start_decides_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No child process could be started (a frozen build gone wrong): the load goes on, without the buffers."""

    def refuse(_self: object) -> None:
        raise OSError("no child processes here")

    monkeypatch.setattr(multiprocessing.context.SpawnProcess, "start", refuse)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    assert amx_probe._probe(model, None) is None


@pytest.mark.parametrize("signal_number", [signal.SIGILL, signal.SIGSEGV, signal.SIGBUS])
def test_a_child_killed_by_the_kernels_marks_the_machine_when_the_plain_kernels_live(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, signal_number: int
) -> None:
    """One cloud VM's AMX kernels died with SIGILL, another's with SIGSEGV: either way a second child
    without the extra buffers tells whether they are what crashes."""
    monkeypatch.delenv(amx_probe.ENV_OVERRIDE, raising=False)
    monkeypatch.setattr(amx_probe, "cpu_has_amx", lambda: True)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    asked: list[bool] = []

    def probe(_path: Path, _cancel: object, extra_buffers: bool = True) -> int:
        asked.append(extra_buffers)
        return -signal_number if extra_buffers else 0

    monkeypatch.setattr(amx_probe, "_probe", probe)
    assert extra_buffers_usable(model, cache_dir=tmp_path) is False
    assert asked == [True, False] and broken_mark(tmp_path).exists()
    assert extra_buffers_usable(model, cache_dir=tmp_path) is False and asked == [True, False]  # the mark answers


def test_a_model_that_crashes_without_the_extra_buffers_too_marks_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(amx_probe.ENV_OVERRIDE, raising=False)
    monkeypatch.setattr(amx_probe, "cpu_has_amx", lambda: True)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setattr(amx_probe, "_probe", lambda _path, _cancel, extra_buffers=True: -signal.SIGSEGV)
    assert extra_buffers_usable(model, cache_dir=tmp_path) is False
    assert not broken_mark(tmp_path).exists()


@pytest.mark.slow
def test_the_plain_kernels_decode_the_probes_batch_in_a_child(starter_model: Path) -> None:
    assert amx_probe._probe(starter_model, None, extra_buffers=False) == 0
