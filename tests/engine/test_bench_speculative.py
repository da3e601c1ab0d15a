"""bench.speculative's machinery on the tiny model: every task runs off, auto and ngram, the answers are the same
and the counts come back (the speeds themselves are the benchmark's, not asserted here). bench.speculative_vs_llama:
llama-lookup's and llama-speculative-simple's logs read (captured from the real programs), their command lines, and
both comparisons end to end where llama.cpp's programs are built."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from bench import speculative, speculative_vs_llama
from bench.llama_tools import (
    LlamaSpeculationResult,
    find_tool,
    llama_speculation,
    llama_speculation_command,
    parse_llama_speculation,
)
from tests.helpers.paths import TESTS

SAMPLES = TESTS / "llama_bench_samples"


def test_the_speculative_benchmark_compares_off_auto_and_ngram(
    tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--model", str(tiny_model), "--tokens", "16", "--rounds", "1", "--threads", "1", "--ctx", "1024", "--json"]
    assert speculative.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    for task in speculative.TASKS:
        figures = out[task]
        assert figures["identical"] is True
        for mode in speculative.MODES:
            assert figures[f"{mode}_decode_tokens_per_s"] > 0
        for mode in ("auto", "ngram"):
            assert 0 <= figures[f"{mode}_accepted"] <= figures[f"{mode}_drafted"]
        assert figures["auto_stopped"].endswith("of 1")
    assert out["rounds"] == 1 and out["tokens"] == 16


# --- llama.cpp's own speculation beside Ember's (bench.speculative_vs_llama) -------------------------------


def test_llama_lookup_and_speculative_simple_logs_are_read() -> None:
    """Logs captured from the real programs (llama-cpp-python 0.3.36's llama.cpp, the chat starter, 32 tokens):
    llama-lookup on a copying prompt, llama-speculative-simple with the starter as its own draft."""
    lookup = parse_llama_speculation((SAMPLES / "lookup.txt").read_text())
    assert (lookup.decoded, lookup.decode_seconds, lookup.decode_tokens_per_s) == (36, 3.621, 9.942)
    assert (lookup.n_draft, lookup.drafted, lookup.accepted) == (3, 27, 25)
    assert lookup.acceptance == pytest.approx(0.92593, abs=1e-5)  # (its own line: "accept = 92.593%")
    simple = parse_llama_speculation((SAMPLES / "speculative_simple.txt").read_text())
    assert (simple.decoded, simple.decode_tokens_per_s, simple.n_draft) == (36, 1.438, 3)
    assert simple.drafted == simple.accepted == 27 and simple.acceptance == 1.0


def test_a_log_without_the_figures_is_refused() -> None:
    log = (SAMPLES / "lookup.txt").read_text()
    with pytest.raises(ValueError, match="decoded N tokens"):
        parse_llama_speculation(log.replace("decoded", "(cut)"))
    with pytest.raises(ValueError, match="'n_accept = '"):
        parse_llama_speculation(log.replace("n_accept", "(cut)"))
    with pytest.raises(ValueError, match="'n_draft = '"):  # (n_drafted's line is not n_draft's)
        parse_llama_speculation(log.replace("n_draft      =", "(cut)"))
    assert LlamaSpeculationResult(8, 1.0, 8.0, 3, 0, 0).acceptance is None


@pytest.mark.parametrize(("usable", "repacked"), [("1", True), ("0", False)])
def test_llama_lookup_and_speculative_simple_get_ember_s_settings(
    monkeypatch: pytest.MonkeyPatch, usable: str, repacked: bool
) -> None:
    """Greedy, the answer's length not cut by EOS, the same threads, context and flash attention as
    llama_server_command; the draft model's type named (llama-speculative-simple infers none: without it,
    'failed to initialize speculative decoding') and its threads; repacking only where Ember uses it."""
    monkeypatch.setenv("EMBER_LLAMA_EXTRA_BUFFERS", usable)
    tool, model, draft = Path("/x/llama-lookup"), Path("/m/model.gguf"), Path("/m/draft.gguf")
    argv = llama_speculation_command(tool, model, "a\nprompt", 64, 2, 2048)
    assert argv[:7] == ["/x/llama-lookup", "-m", "/m/model.gguf", "-p", "a\nprompt", "-n", "64"]
    assert argv[argv.index("-t") + 1] == argv[argv.index("-tb") + 1] == "2" and argv[argv.index("-c") + 1] == "2048"
    assert argv[argv.index("--temp") + 1] == "0" and "--ignore-eos" in argv and argv[argv.index("-fa") + 1] == "off"
    assert "-md" not in argv and "--spec-draft-n-max" not in argv and ("--no-repack" not in argv) is repacked
    simple = llama_speculation_command(tool, model, "p", 64, 2, 2048, draft_model=draft, draft_max=8)
    assert simple[simple.index("-md") + 1] == "/m/draft.gguf"
    assert simple[simple.index("--spec-type") + 1] == "draft-simple"
    assert simple[simple.index("-td") + 1] == simple[simple.index("-tbd") + 1] == "2"
    assert simple[simple.index("--spec-draft-n-max") + 1] == "8"


BUILT = all(find_tool(name) for name in ("llama-server", "llama-lookup", "llama-speculative-simple"))
NOT_BUILT = "llama.cpp's programs are not built (python -m bench.llama_tools --build)"


@pytest.mark.skipif(not BUILT, reason=NOT_BUILT)
def test_the_built_llama_lookup_and_speculative_simple_run_and_their_logs_are_read(tiny_model: Path) -> None:
    lookup, simple = find_tool("llama-lookup"), find_tool("llama-speculative-simple")
    assert lookup is not None and simple is not None
    prompt = speculative.TASKS["copy"]
    looked_up = llama_speculation(llama_speculation_command(lookup, tiny_model, prompt, 8, 1, 1024))
    assert looked_up.decoded >= 8 and looked_up.decode_tokens_per_s > 0 and looked_up.n_draft == 3
    assert 0 <= looked_up.accepted <= looked_up.drafted
    command = llama_speculation_command(simple, tiny_model, prompt, 8, 1, 1024, draft_model=tiny_model)
    drafted = llama_speculation(command)
    assert drafted.decoded >= 8 and drafted.decode_tokens_per_s > 0
    assert drafted.drafted > 0 and 0 <= drafted.accepted <= drafted.drafted
    with pytest.raises(RuntimeError, match="llama-lookup failed"):
        llama_speculation(llama_speculation_command(lookup, tiny_model.with_name("absent.gguf"), prompt, 8, 1, 1024))


@pytest.mark.skipif(not BUILT, reason=NOT_BUILT)
def test_speculative_vs_llama_compares_ngrams_and_a_draft_model(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both comparisons end to end on the tiny model (its own draft): every side's rate and counts, Ember's
    answers the same with and without speculation, llama.cpp's programs with Ember's flash attention (on)."""
    commands: list[list[str]] = []

    def recorded(make: Callable[..., list[str]]) -> Callable[..., list[str]]:
        return lambda *a, **kw: commands.append(make(*a, **kw)) or commands[-1]

    for name in ("llama_server_command", "llama_speculation_command"):
        monkeypatch.setattr(speculative_vs_llama, name, recorded(getattr(speculative_vs_llama, name)))
    argv = ["--model", str(tiny_model), "--tokens", "8", "--rounds", "1", "--threads", "1", "--ctx", "1024", "--json"]
    assert speculative_vs_llama.main(argv) == 0
    ngram = json.loads(capsys.readouterr().out)
    assert speculative_vs_llama.main([*argv, "--draft-model", str(tiny_model), "--llama-draft-max", "4"]) == 0
    draft = json.loads(capsys.readouterr().out)
    assert ngram["draft_model"] is None and draft["draft_model"] == tiny_model.name
    assert draft["llama_draft_max"] == 4 and ngram["tokens"] == draft["tokens"] == 8
    names = [Path(c[0]).name for c in commands]
    assert names.count("llama-server") == 4 and names.count("llama-lookup") == names.count("llama-speculative-simple")
    assert names.count("llama-lookup") == len(speculative.TASKS)  # (one round)
    assert all(c[c.index("-fa") + 1] == "on" for c in commands)
    for task in speculative.TASKS:
        row = ngram[task]
        for side in ("ember_off", "ember_ngram", "llama_server", "llama_server_ngram_mod", "llama_lookup"):
            assert row[f"{side}_decode_tokens_per_s"] > 0
        assert row["vs_llama_lookup"] > 0 and 0 <= row["llama_lookup_accepted"] <= row["llama_lookup_drafted"]
        assert row["ember_identical"] is True
        row = draft[task]
        for side in ("ember_off", "ember_draft", "llama_server", "llama_server_draft", "llama_speculative_simple"):
            assert row[f"{side}_decode_tokens_per_s"] > 0
        assert (
            row["ember_drafted"] > 0
            and row["llama_server_drafted"] > 0
            and "llama_server_ngram_mod_decode_tokens_per_s" in ngram[task]
        )
        assert row["llama_speculative_simple_drafted"] > 0 and row["vs_llama_speculative_simple"] > 0
        assert row["ember_identical"] is True


def test_speculative_vs_llama_says_what_is_not_built(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(speculative_vs_llama, "find_tool", lambda name: None)
    assert speculative_vs_llama.main(["--model", str(tiny_model), "--draft-model", str(tiny_model)]) == 2
    assert "llama-server, llama-speculative-simple not built" in capsys.readouterr().err


def test_speculative_vs_llama_stops_on_a_refused_draft_model(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A draft model the runtime refuses is said, not compared (Ember would have answered without one)."""
    monkeypatch.setattr(speculative_vs_llama, "find_tool", lambda name: Path("/x") / name)
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(tiny_model.read_bytes()[:4096])
    assert speculative_vs_llama.main(["--model", str(tiny_model), "--draft-model", str(truncated)]) == 2
    assert "the draft model was refused" in capsys.readouterr().err


def test_a_run_that_lost_its_figures_is_run_again(tmp_path: Path) -> None:
    """llama.cpp's log loses the end of a run at times (exit 0, no figures): the run is made again, up to 3
    runs; a failing run is said at once."""
    log = tmp_path / "figures.txt"
    log.write_text((SAMPLES / "lookup.txt").read_text())
    tool = tmp_path / "llama-lookup"
    runs = tmp_path / "runs"
    tool.write_text(f'#!/bin/sh\necho run >> {runs}\n[ $(wc -l < {runs}) -ge "$1" ] && cat {log} >&2\nexit 0\n')
    tool.chmod(0o755)
    assert llama_speculation([str(tool), "2"]).decoded == 36
    assert runs.read_text().count("run") == 2
    runs.unlink()
    with pytest.raises(RuntimeError, match=r"llama-lookup, 3 runs: no 'decoded N tokens"):
        llama_speculation([str(tool), "9"])
    assert runs.read_text().count("run") == 3
    tool.write_text("#!/bin/sh\necho 'error: no model' >&2\nexit 1\n")
    with pytest.raises(RuntimeError, match=r"llama-lookup failed \(exit 1\):\nerror: no model"):
        llama_speculation([str(tool)])
