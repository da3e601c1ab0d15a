"""llama.cpp's own C++ programs — `llama-bench`, `llama-server`, `llama-batched-bench`, and the examples
`llama-lookup` (prompt lookup decoding) and `llama-speculative-simple` (a draft model) — built from the very
source the pinned llama-cpp-python ships (its sdist's `vendor/llama.cpp`), so the benchmarks compare Ember
with the same llama.cpp it runs on.

    python -m bench.llama_tools --build --json     # download, unpack, configure, build (~20 min on 2 cores)
    python -m bench.llama_tools --json             # where the tools are; builds nothing

Everything lives outside the checkout, in `~/.cache/ember-bench-llama/` (`$EMBER_BENCH_LLAMA_CACHE`
elsewhere): `sdist/llama_cpp_python-<version>.tar.gz` (`pip download --no-deps --no-binary :all:`), the
unpacked `llama_cpp_python-<version>/`, its `vendor/llama.cpp/build/bin/` and the logs `cmake.log`,
`build.log`. Each step is skipped when its result is there, so an existing build is reused as it is and an
interrupted one resumes; a build configured with other flags (one from before the examples were built:
`LLAMA_BUILD_EXAMPLES=OFF`) is configured again, and make compiles only what that adds. Two builds at once
wait for each other (a lock file).

Also here: running `llama-bench` and reading its JSON output (`llama_bench`, `parse_llama_bench`), the
command line of `llama-server` as the benchmarks start it (`llama_server_command`), and running
`llama-lookup` / `llama-speculative-simple` and reading the figures they print (`llama_speculation`,
`parse_llama_speculation`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import version as installed_version
from pathlib import Path
from typing import Any

from ember_chat.engine.inference.llama.amx_probe import extra_buffers_usable

TOOLS = ("llama-bench", "llama-server", "llama-batched-bench", "llama-lookup", "llama-speculative-simple")
PACKAGE = "llama-cpp-python"
CACHE_ENV = "EMBER_BENCH_LLAMA_CACHE"
# measured-facts.md: the flags the figures were taken with (the CPU's own instructions, no network code)
CMAKE_FLAGS = (
    "-DGGML_NATIVE=ON",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=ON",  # (llama-lookup, llama-speculative-simple; only the targets asked are compiled)
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DCMAKE_BUILD_TYPE=Release",
)


class BuildFailed(RuntimeError):
    """A step of the build failed; the message says which, and the end of its log."""


def pinned_version() -> str:
    """The installed llama-cpp-python's version: the source whose llama.cpp is built."""
    return installed_version(PACKAGE)


def default_cache() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ember-bench-llama"


@dataclass(frozen=True)
class Layout:
    """Where each piece of one version's build lives in the cache."""

    cache: Path
    version: str

    @property
    def sdist_dir(self) -> Path:
        return self.cache / "sdist"

    @property
    def sdist(self) -> Path:
        return self.sdist_dir / f"llama_cpp_python-{self.version}.tar.gz"

    @property
    def root(self) -> Path:
        return self.cache / f"llama_cpp_python-{self.version}"

    @property
    def source(self) -> Path:
        return self.root / "vendor" / "llama.cpp"

    @property
    def build(self) -> Path:
        return self.source / "build"

    @property
    def bin(self) -> Path:
        return self.build / "bin"

    def tool(self, name: str) -> Path:
        return self.bin / (name + (".exe" if sys.platform == "win32" else ""))


def layout(cache: Path | None = None, version: str | None = None) -> Layout:
    return Layout(cache or default_cache(), version or pinned_version())


def find_tool(name: str, cache: Path | None = None, version: str | None = None) -> Path | None:
    """The built program `name` (one of TOOLS) for the pinned llama-cpp-python, or None when it is not
    built (never a llama.cpp found elsewhere on the PATH: it would be another version)."""
    path = layout(cache, version).tool(name)
    return path if path.is_file() and os.access(path, os.X_OK) else None


def download_command(lay: Layout) -> list[str]:
    return [
        sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
        f"{PACKAGE}=={lay.version}", "-d", str(lay.sdist_dir),
    ]  # fmt: skip


def configure_command(lay: Layout) -> list[str]:
    return ["cmake", "-S", str(lay.source), "-B", str(lay.build), *CMAKE_FLAGS]


def configured_differently(lay: Layout) -> list[str]:
    """The CMAKE_FLAGS that the build folder's CMakeCache.txt holds with another value ("-DNAME=VALUE" as
    it should be); every flag when it is not configured yet."""
    cache = lay.build / "CMakeCache.txt"
    if not cache.is_file():
        return list(CMAKE_FLAGS)
    held: dict[str, str] = {}
    for line in cache.read_text(encoding="utf-8", errors="replace").splitlines():
        name, sep, value = line.partition("=")
        if sep and not line.startswith(("#", "//")):
            held[name.partition(":")[0]] = value
    return [f for f in CMAKE_FLAGS if held.get(f[2:].partition("=")[0]) != f.partition("=")[2]]


def build_command(lay: Layout, jobs: int, targets: Sequence[str] = TOOLS) -> list[str]:
    return ["cmake", "--build", str(lay.build), f"-j{jobs}", "--target", *targets]


def _run_logged(command: list[str], log_file: Path, what: str) -> None:
    with log_file.open("a", encoding="utf-8") as log:
        log.write(f"\n$ {' '.join(command)}\n")
        log.flush()
        try:
            code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
        except FileNotFoundError as exc:
            raise BuildFailed(f"{what}: {command[0]} is not installed ({exc.strerror}).") from exc
    if code != 0:
        tail = log_file.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
        raise BuildFailed(f"{what} failed (exit {code}); the end of {log_file}:\n" + "\n".join(tail))


@contextlib.contextmanager
def _locked(cache: Path) -> Iterator[None]:
    """One build at a time in this cache (a second waits for the first, then finds its result)."""
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / ".build.lock").open("w") as handle:
        try:
            import fcntl
        except ImportError:  # (Windows: no lock)
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def prepare_source(lay: Layout, say: Callable[[str], None]) -> None:
    """The sdist downloaded (unless it is there) and unpacked (unless it is), atomically: a half-unpacked
    tree is never taken for a whole one."""
    if not lay.sdist.is_file():
        lay.sdist_dir.mkdir(parents=True, exist_ok=True)
        say(f"downloading the {PACKAGE} {lay.version} source into {lay.sdist_dir}")
        _run_logged(download_command(lay), lay.cache / "download.log", "pip download")
        if not lay.sdist.is_file():
            raise BuildFailed(f"pip download did not leave {lay.sdist.name} in {lay.sdist_dir}.")
    if (lay.source / "CMakeLists.txt").is_file():
        return
    say(f"unpacking {lay.sdist.name}")
    staging = lay.cache / f".unpack-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        with tarfile.open(lay.sdist) as archive:
            archive.extractall(staging, filter="data")
    except (tarfile.TarError, OSError) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        lay.sdist.unlink(missing_ok=True)  # (the next build downloads it again)
        raise BuildFailed(f"{lay.sdist.name} could not be unpacked ({exc}); it was removed: build again.") from exc
    unpacked = staging / lay.root.name
    if not (unpacked / "vendor" / "llama.cpp" / "CMakeLists.txt").is_file():
        shutil.rmtree(staging, ignore_errors=True)
        raise BuildFailed(f"{lay.sdist.name} has no vendor/llama.cpp/CMakeLists.txt: not the expected source.")
    shutil.rmtree(lay.root, ignore_errors=True)
    os.replace(unpacked, lay.root)
    shutil.rmtree(staging, ignore_errors=True)


def build(
    cache: Path | None = None,
    jobs: int | None = None,
    say: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
    targets: Sequence[str] = TOOLS,
) -> dict[str, Any]:
    """Every tool built (reused when it already is); what `--build --json` prints."""
    lay = layout(cache)
    t0 = time.monotonic()
    compiled = False
    with _locked(lay.cache):
        if not all(find_tool(t, lay.cache, lay.version) for t in targets):
            prepare_source(lay, say)
            changed = configured_differently(lay)
            if changed:
                # (configuring an existing build again keeps its objects: the ones whose flags did not change
                # are not compiled again)
                say(f"configuring llama.cpp in {lay.build} ({' '.join(changed)})")
                _run_logged(configure_command(lay), lay.cache / "cmake.log", "cmake configure")
            say(f"building {', '.join(targets)} (about 20 minutes on 2 cores; log: {lay.cache / 'build.log'})")
            _run_logged(build_command(lay, jobs or os.cpu_count() or 2, targets), lay.cache / "build.log", "build")
            compiled = True
        missing = [t for t in targets if find_tool(t, lay.cache, lay.version) is None]
        if missing:
            raise BuildFailed(f"the build ended without {', '.join(missing)} in {lay.bin}.")
    report = describe(lay)
    report.update(built_now=compiled, seconds=round(time.monotonic() - t0, 1))
    return report


def tool_version(path: Path) -> str | None:
    """`<tool> --version`'s first line ("version: 0.5.0-dev (build 1, commit 0c1e570)")."""
    try:
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (out.stdout + out.stderr).strip().splitlines()
    return lines[0].strip() if lines else None


def describe(lay: Layout) -> dict[str, Any]:
    tools = {t: find_tool(t, lay.cache, lay.version) for t in TOOLS}
    first = next((p for p in tools.values() if p is not None), None)
    return {
        "llama_cpp_python": lay.version,
        "cache": str(lay.cache),
        "source": str(lay.source),
        "tools": {t: str(p) if p else None for t, p in tools.items()},
        "llama_cpp_build": tool_version(first) if first else None,
    }


# --- llama-bench -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LlamaBenchResult:
    """One test of llama-bench's JSON output: pp (n_gen 0) or tg (n_prompt 0) at a depth."""

    n_prompt: int
    n_gen: int
    n_depth: int
    avg_tokens_per_s: float
    samples_tokens_per_s: tuple[float, ...]

    @property
    def test(self) -> str:
        """llama-bench's own name of the test: "pp128", "tg64", "pp512 @ d128"."""
        name = f"pp{self.n_prompt}" if self.n_gen == 0 else f"tg{self.n_gen}"
        if self.n_prompt and self.n_gen:
            name = f"pp{self.n_prompt}+tg{self.n_gen}"
        return name + (f" @ d{self.n_depth}" if self.n_depth else "")


def parse_llama_bench(text: str) -> list[LlamaBenchResult]:
    """llama-bench's `-o json` output (a JSON list, one object per test)."""
    rows = json.loads(text)
    if not isinstance(rows, list):
        raise ValueError("llama-bench's JSON output is not a list of tests.")
    return [
        LlamaBenchResult(
            n_prompt=int(r["n_prompt"]),
            n_gen=int(r["n_gen"]),
            n_depth=int(r.get("n_depth", 0)),
            avg_tokens_per_s=float(r["avg_ts"]),
            samples_tokens_per_s=tuple(float(s) for s in r.get("samples_ts", [r["avg_ts"]])),
        )
        for r in rows
    ]


def llama_bench_command(
    tool: Path,
    model: Path,
    threads: int,
    *,
    prompts: Sequence[int] = (0,),
    gen: Sequence[int] = (0,),
    depths: Sequence[int] = (0,),
    repetitions: int = 1,
    flash_attn: bool = False,
) -> list[str]:
    def csv(values: Sequence[int]) -> str:
        return ",".join(str(v) for v in values)

    return [
        str(tool), "-m", str(model), "-t", str(threads), "-p", csv(prompts), "-n", csv(gen), "-d", csv(depths),
        "-r", str(repetitions), "-fa", "1" if flash_attn else "0", "-o", "json",
    ]  # fmt: skip


def llama_bench(command: list[str], timeout_s: float = 1800) -> list[LlamaBenchResult]:
    """Run llama-bench (a command from `llama_bench_command`) and read its results."""
    out = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"llama-bench failed (exit {out.returncode}):\n" + out.stderr[-2000:])
    return parse_llama_bench(out.stdout)


# --- llama-lookup, llama-speculative-simple -------------------------------------------------------


@dataclass(frozen=True)
class LlamaSpeculationResult:
    """The figures llama-lookup (prompt lookup decoding) and llama-speculative-simple (a draft model) print
    at the end of a run (the same lines in both): the decode rate is theirs, drafting included."""

    decoded: int  # n_predict: may pass -n by up to a draft's length (a step's accepted tokens are all kept)
    decode_seconds: float
    decode_tokens_per_s: float
    n_draft: int  # the most tokens a draft may have (--spec-draft-n-max)
    drafted: int
    accepted: int

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None


_DECODED = re.compile(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+|inf|nan) t/s")


def _count(name: str, text: str) -> int:
    found = re.search(rf"\b{name}\s*=\s*(\d+)", text)
    if found is None:
        raise ValueError(f"no '{name} = ' line in the output.")
    return int(found.group(1))


def parse_llama_speculation(text: str) -> LlamaSpeculationResult:
    """llama-lookup's or llama-speculative-simple's log (stderr): its `decoded N tokens in S seconds, speed:
    R t/s` line and its `n_draft`, `n_drafted`, `n_accept` counts (each line may carry the log's prefix)."""
    decoded = _DECODED.search(text)
    if decoded is None:
        raise ValueError("no 'decoded N tokens in S seconds' line in the output.")
    return LlamaSpeculationResult(
        decoded=int(decoded.group(1)),
        decode_seconds=float(decoded.group(2)),
        decode_tokens_per_s=float(decoded.group(3)),
        n_draft=_count("n_draft", text),
        drafted=_count("n_drafted", text),
        accepted=_count("n_accept", text),
    )


def llama_speculation_command(
    tool: Path,
    model: Path,
    prompt: str,
    tokens: int,
    threads: int,
    n_ctx: int,
    *,
    draft_model: Path | None = None,
    draft_max: int | None = None,
    flash_attn: bool = False,
) -> list[str]:
    """llama-lookup (no draft model) or llama-speculative-simple (`-md draft_model`, its own drafts' type
    named: it infers none) on one greedy answer of `tokens` that does not stop at EOS, the threads, context
    and repacking as llama_server_command gives them; `draft_max` None: the tool's own default (3)."""
    repack = extra_buffers_usable(model)
    draft = [] if draft_model is None else [
        "-md", str(draft_model), "--spec-type", "draft-simple", "-td", str(threads), "-tbd", str(threads),
    ]  # fmt: skip
    return [
        str(tool), "-m", str(model), *draft, "-p", prompt, "-n", str(tokens), "-t", str(threads),
        "-tb", str(threads), "-c", str(n_ctx), "-fa", "on" if flash_attn else "off", "--temp", "0",
        "--ignore-eos", *(["--spec-draft-n-max", str(draft_max)] if draft_max else []),
        *([] if repack else ["--no-repack"]),
    ]  # fmt: skip


def llama_speculation(command: list[str], timeout_s: float = 1800, tries: int = 3) -> LlamaSpeculationResult:
    """Run llama-lookup or llama-speculative-simple (a command from `llama_speculation_command`) and read
    its figures. A run that exits 0 without them is run again, up to `tries` runs: llama.cpp's log (a
    worker thread) loses the end of a run at times: on the tiny test model 7 of 65 runs (both programs)
    ended without their answer's text and figures, on stderr and in --log-file alike."""
    name, problem = Path(command[0]).name, ValueError("it was not run.")
    for _ in range(tries):
        # (its output holds the answer's pieces as printed: a token may end mid-character)
        out = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=timeout_s, check=False)
        if out.returncode != 0:
            raise RuntimeError(f"{name} failed (exit {out.returncode}):\n" + out.stderr[-2000:])
        try:
            return parse_llama_speculation(out.stderr)
        except ValueError as exc:
            problem = exc
    raise RuntimeError(f"{name}, {tries} runs: {problem} The end of its log:\n" + out.stderr[-2000:])


# --- llama-server ----------------------------------------------------------------------------------

LLAMA_SERVER_READY = "server is listening on|listening on http"


def llama_server_command(
    tool: Path,
    model: Path,
    port: int,
    threads: int,
    n_ctx: int,
    *,
    parallel: int | None = None,
    flash_attn: bool = False,
) -> list[str]:
    """llama-server as the benchmarks run it: loopback, the given threads (prompt and decode) and context
    (shared by all slots: unified KV, its default), `-np` slots (None: its own default). Its weights are
    not repacked for llama.cpp's extra CPU buffer types where Ember loads without them (a processor whose
    AMX kernels crash: inference/llama/amx_probe.py), so both run the same kernels (and it does not die
    of SIGILL)."""
    repack = extra_buffers_usable(model)
    return [
        str(tool), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-t", str(threads),
        "-tb", str(threads), "-c", str(n_ctx), "-fa", "on" if flash_attn else "off",
        *(["-np", str(parallel)] if parallel else []), *([] if repack else ["--no-repack"]),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", action="store_true", help="build what is missing (else only say where things are)")
    ap.add_argument("--jobs", type=int, default=None, help="compile jobs (default: the CPU count)")
    ap.add_argument("--cache", type=Path, default=None, help=f"cache folder (default: {default_cache()})")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    try:
        report = build(args.cache, args.jobs) if args.build else describe(layout(args.cache))
    except BuildFailed as exc:
        if args.json:
            print(json.dumps({"error": str(exc)}))
        else:
            print(f"bench.llama_tools: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for key, value in report.items():
            print(f"{key:18} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
