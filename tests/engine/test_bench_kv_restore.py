"""bench/kv_restore.py: its options, the context it sizes, conversations of the asked-for length, the
printed keys (ratios, identity, bytes per token), and one whole quick measurement on a tiny model through
real engine services and a real snapshot folder: switched away and restarted, the conversation comes back
from the store (restored tokens), answers identical to the held conversation's."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import kv_restore
from bench.kv_restore import SCENARIOS, Answer, context_for, conversation, measure_length, others, summarize
from ember_chat.engine.core.params import LoadConfig
from tests.helpers.gguf_factory import write_tiny_model


def test_options_quick_and_lengths_too_short_to_snapshot() -> None:
    args = kv_restore.parse_args([])
    assert (args.length_list, args.runs, args.model) == ([512, 2048, 8192], 3, "starter")
    quick = kv_restore.parse_args(["--quick"])
    assert (quick.length_list, quick.runs, quick.max_tokens, quick.parallel) == ([384], 1, 8, 2)
    with pytest.raises(SystemExit):
        kv_restore.parse_args(["--lengths", "128,512"])


def test_the_context_holds_the_conversation_its_follow_ups_and_the_other_chats() -> None:
    for n in (384, 512, 2048, 8192):
        ctx = context_for(n, 4, 32)
        assert ctx % 256 == 0 and ctx >= n + 3 * 32 + 5 * 40


def test_other_chats_differ() -> None:
    chats = others(4, 7) + others(4, 8)
    assert len({c[0].content for c in chats}) == 8


def _answer(ttft: float, text: str = "same", restored: int = 0, reused: int = 0) -> Answer:
    return Answer(text, ttft, 2048, reused, restored, 8)


def _run(stored: float, recomputed: float, text: str = "same", bytes_per_token: float = 23_000.0) -> dict:
    run = {
        s: {
            "stored": _answer(stored, restored=2000 if s != "right_after" else 0),
            "held": _answer(stored * 0.9, text),
            "recomputed": _answer(recomputed, reused=24),
        }
        for s in SCENARIOS
    }
    return {**run, "first_identical": True, "bytes_per_token": bytes_per_token, "files": 1}


def test_the_printed_keys() -> None:
    out = summarize([2048], {2048: [_run(0.1, 2.0), _run(0.2, 2.0), _run(0.3, 2.0)]})
    for key in ("switch_ratio_2048", "restart_ratio_2048", "right_after_ratio_2048", "identical", "bytes_per_token"):
        assert key in out
    assert out["switch_ratio_2048"] == 0.1 and out["restart_ttft_s_2048"] == 0.2
    assert out["switch_recomputed_ttft_s_2048"] == 2.0 and out["switch_restored_tokens_2048"] == 2000
    assert out["right_after_restored_tokens_2048"] == 0 and out["switch_recomputed_reused_tokens_2048"] == 24
    assert out["identical"] is True and out["identical_2048"] is True and out["bytes_per_token"] == 23000.0
    assert out["restart_retokenized_2048"] is False
    differs = summarize([2048], {2048: [_run(0.1, 2.0), _run(0.1, 2.0, text="other")]})
    assert differs["identical"] is False and differs["identical_recomputed"] is True


def test_a_whole_quick_measurement_on_a_tiny_model(tmp_path: Path) -> None:
    model = write_tiny_model(tmp_path / "tiny.gguf")
    args = kv_restore.parse_args(["--quick"])
    config = LoadConfig(model, n_ctx=context_for(384, args.parallel, args.max_tokens), threads=1, parallel=2)
    folder = tmp_path / "snapshots"
    figures = measure_length(config, 384, 0, folder, args)
    assert figures["first_identical"]
    for s in SCENARIOS:
        stored, recomputed = figures[s]["stored"], figures[s]["recomputed"]
        assert recomputed.reused < stored.prompt_tokens // 4  # it evaluated (nearly) the whole prompt
    # the same tokens as the held conversation: the same greedy answer
    assert figures["right_after"]["stored"].text == figures["right_after"]["held"].text
    assert figures["right_after"]["stored"].restored == 0
    # After switching away (the sequences' cells given up) and after the restart the answers' text is
    # tokenized again (the held service keeps the tokens it generated; the random model's text does not
    # round-trip), so the snapshot is shared up to the first answer: restored, but not all of it, and
    # the prompt is the recomputed service's
    for s in ("switch", "restart"):
        stored = figures[s]["stored"]
        assert stored.restored > 256 and stored.prompt_tokens == figures[s]["recomputed"].prompt_tokens
    assert figures["files"] >= 1 and figures["bytes_per_token"] > 0
    assert list(folder.glob("*.kvsnap"))


def test_a_conversation_has_about_the_asked_for_length(tmp_path: Path) -> None:
    from bench.kv_restore import open_service

    model = write_tiny_model(tmp_path / "tiny.gguf")
    service = open_service(LoadConfig(model, n_ctx=2048, threads=1, parallel=1), None)
    try:
        chat = conversation(service, 1000, 3)
        counted = sum(len(service.tokenize(m.content) or []) + 5 for m in chat)
    finally:
        service.close()
    assert chat[-1].role == "user" and chat[0].role == "user"
    assert [m.role for m in chat[:4]] == ["user", "assistant", "user", "assistant"][: len(chat[:4])]
    assert 1000 - 16 <= counted <= 1000 + 16
