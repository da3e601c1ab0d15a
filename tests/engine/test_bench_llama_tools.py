"""bench/llama_tools.py: where llama.cpp's own programs are found (only the pinned source's build in the
cache), how they are built (the measured flags, each step skipped when its result is there), and how
llama-bench's JSON output is read (samples captured from the real llama-bench of llama-cpp-python 0.3.36's
llama.cpp; a run of the real one on a tiny model when it is built here)."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from bench import llama_tools
from bench.llama_tools import (
    CMAKE_FLAGS,
    BuildFailed,
    Layout,
    build,
    build_command,
    configure_command,
    download_command,
    find_tool,
    llama_bench,
    llama_bench_command,
    llama_server_command,
    parse_llama_bench,
    prepare_source,
)
from tests.helpers.gguf_factory import write_tiny_model
from tests.helpers.paths import TESTS

SAMPLES = TESTS / "llama_bench_samples"


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho 'version: 0.5.0-dev (build 1, commit 0c1e570)' >&2\n")
    path.chmod(0o755)
    return path


def test_a_tool_is_found_only_where_the_pinned_source_is_built(tmp_path: Path) -> None:
    lay = Layout(tmp_path, "0.3.36")
    assert find_tool("llama-bench", tmp_path, "0.3.36") is None
    assert lay.tool("llama-bench") == tmp_path / "llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin/llama-bench"
    lay.bin.mkdir(parents=True)
    (lay.bin / "llama-bench").write_text("not executable")
    assert find_tool("llama-bench", tmp_path, "0.3.36") is None
    _executable(lay.bin / "llama-server")
    assert find_tool("llama-server", tmp_path, "0.3.36") == lay.bin / "llama-server"
    assert find_tool("llama-server", tmp_path, "0.3.35") is None  # another version's build is not used


def test_the_cache_defaults_to_the_users_cache_folder_and_follows_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(llama_tools.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert llama_tools.default_cache() == tmp_path / "xdg" / "ember-bench-llama"
    monkeypatch.setenv(llama_tools.CACHE_ENV, str(tmp_path / "elsewhere"))
    assert llama_tools.default_cache() == tmp_path / "elsewhere"
    assert llama_tools.layout().version == llama_tools.pinned_version() == "0.3.36"


def test_the_build_commands_use_the_pinned_sdist_and_the_measured_flags(tmp_path: Path) -> None:
    lay = Layout(tmp_path, "0.3.36")
    download = download_command(lay)
    assert download[1:4] == ["-m", "pip", "download"]
    assert "--no-deps" in download and download[download.index("--no-binary") + 1] == ":all:"
    assert "llama-cpp-python==0.3.36" in download and download[-1] == str(lay.sdist_dir)
    configure = configure_command(lay)
    assert configure[:5] == ["cmake", "-S", str(lay.source), "-B", str(lay.build)]
    for flag in ("-DGGML_NATIVE=ON", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_SERVER=ON", "-DCMAKE_BUILD_TYPE=Release"):
        assert flag in configure and flag in CMAKE_FLAGS
    assert build_command(lay, 2) == [
        "cmake", "--build", str(lay.build), "-j2", "--target", "llama-bench", "llama-server", "llama-batched-bench",
        "llama-lookup", "llama-speculative-simple",
    ]  # fmt: skip
    assert "-DLLAMA_BUILD_EXAMPLES=ON" in CMAKE_FLAGS  # (llama-lookup and llama-speculative-simple are examples)


def test_a_build_configured_without_the_examples_is_configured_again_and_builds_only_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lay = Layout(tmp_path, llama_tools.pinned_version())
    (lay.source / "CMakeLists.txt").parent.mkdir(parents=True)
    (lay.source / "CMakeLists.txt").write_text("project(llama)")
    lay.sdist_dir.mkdir()
    lay.sdist.write_bytes(b"(downloaded and unpacked before)")
    for name in ("llama-bench", "llama-server", "llama-batched-bench"):  # (built before the examples were)
        _executable(lay.tool(name))
    held = [f[2:].replace("=", ":BOOL=", 1) for f in CMAKE_FLAGS if f != "-DLLAMA_BUILD_EXAMPLES=ON"]
    (lay.build / "CMakeCache.txt").write_text("\n".join(["# comment", *held, "LLAMA_BUILD_EXAMPLES:BOOL=OFF", ""]))
    assert llama_tools.configured_differently(lay) == ["-DLLAMA_BUILD_EXAMPLES=ON"]
    ran: list[list[str]] = []

    def run(command: list[str], log_file: Path, what: str) -> None:
        ran.append(command)
        if what == "build":
            for name in command[command.index("--target") + 1 :]:
                if not lay.tool(name).exists():
                    _executable(lay.tool(name))

    monkeypatch.setattr(llama_tools, "_run_logged", run)
    said: list[str] = []
    report = build(tmp_path, 2, said.append)
    assert ran == [configure_command(lay), build_command(lay, 2)]
    assert said[0].endswith("(-DLLAMA_BUILD_EXAMPLES=ON)") and report["built_now"] is True
    assert report["tools"]["llama-lookup"] == str(lay.tool("llama-lookup"))
    assert report["tools"]["llama-speculative-simple"] == str(lay.tool("llama-speculative-simple"))

    (lay.build / "CMakeCache.txt").write_text("\n".join([*held, "LLAMA_BUILD_EXAMPLES:BOOL=ON", ""]))
    assert llama_tools.configured_differently(lay) == []
    ran.clear()
    assert build(tmp_path, 2, said.append)["built_now"] is False and ran == []
    (lay.build / "CMakeCache.txt").unlink()
    assert llama_tools.configured_differently(lay) == list(CMAKE_FLAGS)  # (not configured: every flag)


def test_an_existing_build_is_reused_without_running_a_step(tmp_path: Path) -> None:
    lay = Layout(tmp_path, llama_tools.pinned_version())
    for name in llama_tools.TOOLS:
        _executable(lay.tool(name))
    lines: list[str] = []
    report = build(tmp_path, 2, lines.append)
    assert report["built_now"] is False and lines == []
    assert report["tools"] == {name: str(lay.tool(name)) for name in llama_tools.TOOLS}
    assert report["llama_cpp_build"] == "version: 0.5.0-dev (build 1, commit 0c1e570)"
    assert not (tmp_path / "build.log").exists() and not (tmp_path / "cmake.log").exists()


def _sdist(path: Path, top: str, files: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def test_the_sdist_is_unpacked_once_and_a_wrong_one_is_refused(tmp_path: Path) -> None:
    lay = Layout(tmp_path, "0.3.36")
    _sdist(lay.sdist, lay.root.name, {"vendor/llama.cpp/CMakeLists.txt": "project(llama)", "setup.py": ""})
    said: list[str] = []
    prepare_source(lay, said.append)  # already downloaded: only unpacked
    assert (lay.source / "CMakeLists.txt").read_text() == "project(llama)"
    assert said == [f"unpacking {lay.sdist.name}"]
    prepare_source(lay, said.append)
    assert len(said) == 1  # unpacked already: nothing done
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".unpack")] == []

    other = Layout(tmp_path / "other", "0.3.36")
    _sdist(other.sdist, other.root.name, {"README.md": "no llama.cpp here"})
    with pytest.raises(BuildFailed, match=r"no vendor/llama\.cpp/CMakeLists\.txt"):
        prepare_source(other, said.append)
    assert not other.root.exists()


def test_a_failing_step_says_which_and_shows_the_end_of_its_log(tmp_path: Path) -> None:
    log = tmp_path / "step.log"
    with pytest.raises(BuildFailed, match=r"cmake configure failed \(exit 3\)[\s\S]*went wrong"):
        llama_tools._run_logged(["sh", "-c", "echo went wrong; exit 3"], log, "cmake configure")
    with pytest.raises(BuildFailed, match="not-a-program-here is not installed"):
        llama_tools._run_logged(["not-a-program-here"], log, "cmake configure")


def test_llama_bench_output_is_read_per_test() -> None:
    pp = parse_llama_bench((SAMPLES / "pp.json").read_text())
    assert [(r.n_prompt, r.n_gen, r.n_depth, r.test) for r in pp] == [(8, 0, 0, "pp8"), (16, 0, 0, "pp16")]
    assert pp[0].avg_tokens_per_s == pytest.approx(67325.640181)
    assert pp[0].samples_tokens_per_s == (63941.2, 70710.1)
    tg = parse_llama_bench((SAMPLES / "tg.json").read_text())
    assert [(r.n_prompt, r.n_gen, r.n_depth, r.test) for r in tg] == [(0, 4, 8, "tg4 @ d8"), (0, 4, 16, "tg4 @ d16")]
    with pytest.raises(ValueError, match="not a list"):
        parse_llama_bench('{"n_prompt": 8}')


def test_llama_bench_and_llama_server_get_the_same_settings_as_ember(tmp_path: Path) -> None:
    tool, model = Path("/x/llama-bench"), Path("/m/model.gguf")
    argv = llama_bench_command(tool, model, 2, prompts=(0,), gen=(64,), depths=(128, 512), repetitions=1)
    assert argv == [
        "/x/llama-bench", "-m", "/m/model.gguf", "-t", "2", "-p", "0", "-n", "64", "-d", "128,512", "-r", "1",
        "-fa", "0", "-o", "json",
    ]  # fmt: skip
    server = llama_server_command(Path("/x/llama-server"), model, 8080, 2, 4096, parallel=4, flash_attn=True)
    assert server[server.index("-t") + 1] == server[server.index("-tb") + 1] == "2"
    assert server[server.index("-c") + 1] == "4096" and server[server.index("-np") + 1] == "4"
    assert server[server.index("-fa") + 1] == "on" and server[server.index("--host") + 1] == "127.0.0.1"
    assert "-np" not in llama_server_command(Path("/x/llama-server"), model, 8080, 2, 4096)


def test_without_build_the_command_line_says_where_things_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert llama_tools.main(["--cache", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["cache"] == str(tmp_path) and report["llama_cpp_python"] == "0.3.36"
    assert report["tools"] == dict.fromkeys(llama_tools.TOOLS) and report["llama_cpp_build"] is None


def test_a_damaged_sdist_is_removed_and_the_command_line_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lay = Layout(tmp_path, llama_tools.pinned_version())
    lay.sdist_dir.mkdir(parents=True)
    lay.sdist.write_bytes(b"not a tarball")
    assert llama_tools.main(["--build", "--cache", str(tmp_path), "--json"]) == 1
    error = json.loads(capsys.readouterr().out)["error"]
    assert "could not be unpacked" in error and "build again" in error
    assert not lay.sdist.exists() and not lay.root.exists()


@pytest.mark.skipif(find_tool("llama-bench") is None, reason="llama-bench is not built (python -m bench.llama_tools)")
def test_the_built_llama_bench_runs_and_its_output_is_read(tmp_path: Path) -> None:
    tool = find_tool("llama-bench")
    assert tool is not None and os.access(tool, os.X_OK)
    model = write_tiny_model(tmp_path / "tiny.gguf")
    results = llama_bench(llama_bench_command(tool, model, 1, prompts=(0,), gen=(4,), depths=(8, 16), repetitions=1))
    assert [(r.n_gen, r.n_depth) for r in results] == [(4, 8), (4, 16)]
    assert all(r.avg_tokens_per_s > 0 and len(r.samples_tokens_per_s) == 1 for r in results)


@pytest.mark.parametrize(("usable", "repacked"), [("1", True), ("0", False)])
def test_llama_server_repacks_weights_only_where_ember_uses_the_extra_buffers(
    monkeypatch: pytest.MonkeyPatch, usable: str, repacked: bool
) -> None:
    """Where llama.cpp's AMX kernels crash Ember loads without the extra buffer types: llama-server then runs
    the same kernels (--no-repack) instead of dying of SIGILL."""
    monkeypatch.setenv("EMBER_LLAMA_EXTRA_BUFFERS", usable)
    argv = llama_server_command(Path("/x/llama-server"), Path("/m/model.gguf"), 8080, 2, 4096)
    assert ("--no-repack" not in argv) is repacked
