"""Batched decoding (engine/inference/llama/batch_decode.py) on the real starter model (Gemma 3 270M): several
sequences of one llama.cpp context decoded together give the greedy tokens each gives alone and that
`Llama.generate` gives on seq 0; slots are re-used by prefix, saved to and restored from the snapshot
store, and a context whose cells run out ends the youngest run.

What llama.cpp's CPU numerics allow (measured, /tmp/h20/B_facts.md): a sequence's logits are bit-identical
alone and in a batch of up to 3 rows (flash attention on: without it, the summation order of attention
depends on where a sequence's cells lie in the shared cache); 4 or more rows in one decode go through other
matmul kernels (gemm), so there a greedy choice may flip where the two best tokens are nearly tied."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import llama_cpp
import llama_cpp.llama
import numpy as np
import pytest

from ember_chat.engine.core.params import SPECS, LoadConfig, LoadOptions, SamplingParams
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.inference.kv.snapshot_keys import SnapshotKey
from ember_chat.engine.inference.kv.snapshots import SnapshotStore
from ember_chat.engine.inference.llama.amx_probe import extra_buffers_usable
from ember_chat.engine.inference.llama.batch_decode import BatchDecoder, NoFreeSlot, SlotRun
from ember_chat.engine.inference.llama.loader import open_llama
from ember_chat.engine.inference.llama.seq_state import seq_state


def test_parallel_is_a_load_parameter() -> None:
    spec = SPECS["parallel"]
    assert (spec.default, spec.low, spec.high) == (4, 1, 16)
    assert LoadOptions().parallel == 4
    assert LoadConfig("m.gguf", parallel=16).parallel == 16
    for wrong in (0, 17):
        with pytest.raises(InvalidParameter, match="parallel sequences"):
            LoadConfig("m.gguf", parallel=wrong)


def test_the_context_has_parallel_plus_two_sequences_sharing_all_its_cells(starter_model) -> None:
    original = llama_cpp.llama.llama_cpp.llama_context_default_params
    llm = open_llama(LoadConfig(starter_model, n_ctx=512, parallel=3, threads=1))
    try:
        ctx = llm._ctx.ctx
        assert llama_cpp.llama_n_seq_max(ctx) == 5  # seq 0 (llama-cpp-python's own) + 3 slots + the window's
        assert llama_cpp.llama_n_ctx_seq(ctx) == 512  # unified: every sequence may use all the cells
    finally:
        llm.close()
    assert llama_cpp.llama.llama_cpp.llama_context_default_params is original  # the patch is undone


# -- the decoder on the starter model ------------------------------------------------------------------

PROMPTS = (
    "The history of the Roman Empire begins",
    'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n',
    "Once upon a time, in a small village by the sea, there lived an old fisherman who",
    "The three laws of thermodynamics are",
)
GREEDY = SamplingParams(temperature=0.0, max_tokens=64)
TIE = 0.5  # logits: a batched greedy choice may differ from the lone one only where its two best are this close
# ... with llama.cpp's extra CPU buffers (repacked weights). Where they are off (amx_probe.py: a machine whose AMX
# kernels crash), the plain kernels round batches differently: a run diverged where the best led by 0.94.
TIE_PLAIN_KERNELS = 1.0


@pytest.fixture(scope="module")
def llm(starter_model: Path) -> Iterator[llama_cpp.Llama]:
    model = open_llama(LoadConfig(starter_model, n_ctx=1024, n_batch=64, parallel=4, threads=1))
    yield model
    model.close()


def clear(llm: llama_cpp.Llama) -> None:
    llm.reset()
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(llm.ctx), True)


@pytest.fixture
def decoder(llm: llama_cpp.Llama) -> Iterator[BatchDecoder]:
    clear(llm)
    dec = BatchDecoder(llm, 4, None, None)
    yield dec
    dec.close()
    clear(llm)


def tokens_of(llm: llama_cpp.Llama, text: str) -> list[int]:
    return llm.tokenize(text.encode())


def generate(llm: llama_cpp.Llama, tokens: list[int], n: int, reset: bool = True, **kw: float) -> list[int]:
    """llama-cpp-python's own greedy (or seeded) tokens on seq 0."""
    if reset:
        clear(llm)
    out: list[int] = []
    options = {"temp": 0.0, "top_k": 40, "top_p": 0.95, "min_p": 0.05, "repeat_penalty": 1.0} | kw
    for token in llm.generate(tokens, **options):
        out.append(token)
        if len(out) == n:
            break
    return out


def drive(dec: BatchDecoder, wanted: dict[SlotRun, int], outs: dict[SlotRun, list[int]]) -> int:
    """Steps until every run of `wanted` has its number of tokens; returns the steps taken."""
    steps = 0
    while any(not r.finished for r in wanted):
        dec.step()
        steps += 1
        for run, n in wanted.items():
            if run.finished or run.token is None:
                continue
            outs.setdefault(run, []).append(run.token)
            if len(outs[run]) >= n:
                dec.finish(run)
            else:
                dec.accept(run, run.token)
    return steps


def alone(dec: BatchDecoder, tokens: list[int], n: int, params: SamplingParams = GREEDY, seed: int = 0) -> list[int]:
    run = dec.start(tokens, params, seed)
    outs: dict[SlotRun, list[int]] = {}
    drive(dec, {run: n}, outs)
    return outs[run]


def top_two_margin(llm: llama_cpp.Llama, prompt: list[int], answer: list[int]) -> float:
    """How far the best token led the second after `prompt + answer`, evaluated as `generate` evaluates
    them (the prompt at once, then the answer token by token: other batch sizes round differently)."""
    clear(llm)
    llm.eval(prompt)
    for token in answer:
        llm.eval([token])
    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
    first, second = np.sort(logits)[-2:][::-1]
    return float(first - second)


def agrees(llm: llama_cpp.Llama, prompt: list[int], reference: list[int], got: list[int]) -> int | None:
    """Equal to the reference, or equal up to a position where the reference's two best tokens were nearly
    tied (llama.cpp's batched kernels round differently); returns that position (None: all equal)."""
    assert len(got) == len(reference)
    at = next((i for i, (a, b) in enumerate(zip(reference, got, strict=True)) if a != b), None)
    if at is not None:
        margin = top_two_margin(llm, prompt, reference[:at])
        tie = TIE if extra_buffers_usable(Path(llm.model_path)) else TIE_PLAIN_KERNELS
        assert margin < tie, f"diverged at token {at} where the best token led by {margin:.3f} logits"
    return at


def test_a_run_alone_gives_the_tokens_llama_generate_gives(llm: llama_cpp.Llama, decoder: BatchDecoder) -> None:
    for text, n in zip(PROMPTS, (16, 48, 24, 8), strict=True):
        prompt = tokens_of(llm, text)
        reference = generate(llm, prompt, n)
        decoder.evict_all()
        clear(llm)
        assert alone(decoder, prompt, n) == reference, text
    # sampling too: the same chain, in llama-cpp-python's order, with the same seed
    prompt = tokens_of(llm, PROMPTS[2])
    llm.set_seed(1234)
    sampled = generate(llm, prompt, 24, temp=0.8, repeat_penalty=1.1)
    decoder.evict_all()
    clear(llm)
    params = SamplingParams(temperature=0.8, repeat_penalty=1.1, max_tokens=24)
    assert alone(decoder, prompt, 24, params, seed=1234) == sampled


def test_four_concurrent_runs_give_each_the_tokens_it_gives_alone(llm: llama_cpp.Llama, decoder: BatchDecoder) -> None:
    lengths = (44, 32, 16, 24)  # (prompt 0 meets a near-tie at token 40 on this machine)
    prompts = [tokens_of(llm, text) for text in PROMPTS]
    references = [generate(llm, p, n) for p, n in zip(prompts, lengths, strict=True)]
    clear(llm)
    runs = [decoder.start(p, GREEDY, 0) for p in prompts]
    assert sorted(r.slot.seq_id for r in runs) == [1, 2, 3, 4]
    outs: dict[SlotRun, list[int]] = {}
    steps = drive(decoder, dict(zip(runs, lengths, strict=True)), outs)
    assert steps == max(lengths)  # decoded together: one token for each run at every step
    for p, reference, run in zip(prompts, references, runs, strict=True):
        agrees(llm, p, reference, outs[run])


def test_a_newcomer_joins_running_runs_and_its_prompt_goes_in_by_chunks(
    llm: llama_cpp.Llama, decoder: BatchDecoder
) -> None:
    prompts = [tokens_of(llm, text) for text in PROMPTS[:3]]
    newcomer = tokens_of(llm, " ".join(PROMPTS) * 3)  # longer than n_batch (64): evaluated over several steps
    assert len(newcomer) > 2 * decoder.n_batch
    references = [generate(llm, p, 24) for p in prompts]
    new_reference = generate(llm, newcomer, 16)
    clear(llm)
    runs = [decoder.start(p, GREEDY, 0) for p in prompts]
    outs: dict[SlotRun, list[int]] = {}
    for step in range(4):  # the first three get under way: one prompt per step, oldest first
        decoder.step()
        for i, run in enumerate(runs):
            assert (run.token is not None) == (i <= step)
            assert run.pending_prefill == (0 if i <= step else len(prompts[i]))
            if run.token is not None:
                outs.setdefault(run, []).append(run.token)
                decoder.accept(run, run.token)
    late = decoder.start(newcomer, GREEDY, 0)
    chunks = []
    while late.pending_prefill:
        before = late.pending_prefill
        decoder.step()
        chunks.append(before - late.pending_prefill)
        for run in runs:  # every running stream got its token in the same step
            assert run.token is not None
            outs[run].append(run.token)
            decoder.accept(run, run.token)
    assert len(chunks) >= 3 and max(chunks) <= decoder.n_batch - len(runs)
    assert late.token is not None
    wanted = {**{run: 24 for run in runs}, late: 16}
    outs[late] = [late.token]
    decoder.accept(late, late.token)
    drive(decoder, wanted, outs)
    for p, reference, run in zip(prompts, references, runs, strict=True):
        agrees(llm, p, reference, outs[run])
    agrees(llm, newcomer, new_reference, outs[late])


def pos_max(llm: llama_cpp.Llama, seq_id: int) -> int:
    return int(llama_cpp.llama_memory_seq_pos_max(llama_cpp.llama_get_memory(llm.ctx), seq_id))


def state_as(llm: llama_cpp.Llama, seq_id: int, as_id: int) -> bytes:
    """The sequence's state as llama.cpp writes it for `as_id` (its cells name their sequence)."""
    memory = llama_cpp.llama_get_memory(llm.ctx)
    llama_cpp.llama_memory_seq_rm(memory, as_id, -1, -1)
    llama_cpp.llama_memory_seq_cp(memory, seq_id, as_id, -1, -1)
    try:
        return seq_state(llm.ctx, as_id)
    finally:
        llama_cpp.llama_memory_seq_rm(memory, as_id, -1, -1)


def test_a_slot_holding_the_start_of_a_prompt_is_reused_and_only_the_new_tokens_are_evaluated(
    llm: llama_cpp.Llama, decoder: BatchDecoder
) -> None:
    first = tokens_of(llm, PROMPTS[2])
    reference = generate(llm, first, 12)
    follow = first + reference[:11] + tokens_of(llm, " And then the")[1:]
    follow_reference = generate(llm, follow, 12, reset=False)  # llama-cpp-python reuses its prefix the same way
    clear(llm)
    assert alone(decoder, first, 12) == reference
    held = decoder.slots[0]
    assert held.cached == first + reference[:11]  # (the last token sampled was never evaluated)
    run = decoder.start(follow, GREEDY, 0)
    assert run.slot is held
    assert (run.prompt_tokens, run.reused, run.restored) == (len(follow), len(held.cached), 0)
    assert run.pending_prefill == len(follow) - len(first) - 11
    outs: dict[SlotRun, list[int]] = {}
    drive(decoder, {run: 12}, outs)
    assert outs[run] == follow_reference
    # another conversation takes an empty slot; the first slot's is still there for its next turn
    other = decoder.start(tokens_of(llm, PROMPTS[0]), GREEDY, 0)
    assert other.slot is not held and other.reused == 0
    decoder.finish(other)
    assert decoder.start(follow, GREEDY, 0).slot is held


def test_a_conversation_saved_from_one_slot_continues_identically_restored_into_another(
    llm: llama_cpp.Llama, decoder: BatchDecoder
) -> None:
    store = SnapshotStore(None, 0)
    key = SnapshotKey("gemma-3-270m", "test settings")
    long = tokens_of(llm, " ".join(PROMPTS) * 8)[:300]
    assert len(long) == 300 >= store.MIN_TOKENS
    decoder.snapshots, decoder.key = store, key
    answer = alone(decoder, long, 8)
    held = list(decoder.slots[0].cached)
    decoder.save_all()
    saved = seq_state(llm.ctx, 1)
    assert store.usage()[0] == 1
    follow = held + tokens_of(llm, " Then")[1:]
    decoder.snapshots = None  # the continuation on the slot itself, the reference
    reference = alone(decoder, follow, 12)
    decoder.evict_all()
    assert decoder.slots[0].cached == [] and pos_max(llm, 1) == -1
    decoder.snapshots = store
    busy = decoder.start(tokens_of(llm, PROMPTS[0]), GREEDY, 0)  # seq 1 has a run: the restore goes elsewhere
    run = decoder.start(follow, GREEDY, 0)
    assert run.slot is not busy.slot and run.slot.seq_id == 2
    assert (run.reused, run.restored, run.pending_prefill) == (len(held), len(held), len(follow) - len(held))
    decoder.finish(busy)
    assert state_as(llm, 2, 1) == saved  # the very cells the first slot held, byte for byte
    outs: dict[SlotRun, list[int]] = {}
    drive(decoder, {run: 12}, outs)
    assert answer[:7] == held[len(long) :] and outs[run] == reference


def test_evict_all_saves_the_long_conversations_and_leaves_no_cells(
    llm: llama_cpp.Llama, decoder: BatchDecoder
) -> None:
    store = SnapshotStore(None, 0)
    decoder.snapshots, decoder.key = store, SnapshotKey("gemma-3-270m", "test settings")
    long = tokens_of(llm, " ".join(PROMPTS) * 8)[:260]
    runs = [decoder.start(long, GREEDY, 0), decoder.start(tokens_of(llm, PROMPTS[1]), GREEDY, 0)]
    outs: dict[SlotRun, list[int]] = {}
    drive(decoder, dict.fromkeys(runs, 4), outs)
    assert [pos_max(llm, s.seq_id) for s in decoder.slots[:2]] == [len(long) + 2, len(runs[1].slot.cached) - 1]
    decoder.evict_all()
    assert [pos_max(llm, seq_id) for seq_id in range(1, 5)] == [-1] * 4
    assert all(s.cached == [] for s in decoder.slots)
    assert store.usage()[0] == 1  # the long one (the short one is not worth a snapshot)
    match = store.best(decoder.key, long + outs[runs[0]][:3])
    assert match is not None and match.shared == len(long) + 3


@pytest.fixture
def small_llm(starter_model: Path) -> Iterator[llama_cpp.Llama]:
    model = open_llama(LoadConfig(starter_model, n_ctx=256, n_batch=64, parallel=3, threads=1))
    yield model
    model.close()


def test_when_the_cells_run_out_idle_slots_go_first_then_the_youngest_run_ends_full(
    small_llm: llama_cpp.Llama,
) -> None:
    llm = small_llm
    decoder = BatchDecoder(llm, 3, None, None)
    try:
        assert llama_cpp.llama_n_ctx(llm.ctx) == 256
        assert len(alone(decoder, tokens_of(llm, PROMPTS[3]), 4)) == 4  # an idle slot holds its cells
        idle = decoder.slots[0]
        assert idle.cached
        old = decoder.start(tokens_of(llm, PROMPTS[2]), GREEDY, 0)
        young = decoder.start(tokens_of(llm, PROMPTS[0]), GREEDY, 0)
        outs: dict[SlotRun, list[int]] = {}
        steps = 0
        while not young.finished:
            assert steps < 256
            decoder.step()
            steps += 1
            for run in (old, young):
                if run.token is not None and not run.finished:
                    outs.setdefault(run, []).append(run.token)
                    decoder.accept(run, run.token)
        assert young.full and young.token is None and not old.finished
        assert idle.cached == [] and pos_max(llm, idle.seq_id) == -1  # evicted before a run was ended
        assert young.slot.cached == [] and pos_max(llm, young.slot.seq_id) == -1
        # the older run goes on in the room the younger one left
        decoder.step()
        assert old.token is not None and not old.finished
    finally:
        decoder.close()


def test_a_snapshot_llama_cpp_refuses_is_not_used_and_the_prompt_is_evaluated(
    llm: llama_cpp.Llama, decoder: BatchDecoder
) -> None:
    store = SnapshotStore(None, 0)
    key = SnapshotKey("gemma-3-270m", "test settings")
    long = tokens_of(llm, " ".join(PROMPTS) * 8)[:280]
    reference = generate(llm, long, 8)
    clear(llm)
    store.put(key, long, b"not a llama.cpp state" * 100)
    decoder.snapshots, decoder.key = store, key
    run = decoder.start(long, GREEDY, 0)
    assert (run.reused, run.restored, run.pending_prefill) == (0, 0, len(long))
    assert pos_max(llm, run.slot.seq_id) == -1  # nothing half-restored left in its cells
    outs: dict[SlotRun, list[int]] = {}
    drive(decoder, {run: 8}, outs)
    assert outs[run] == reference


def test_a_run_waits_for_a_slot_when_all_are_taken(llm: llama_cpp.Llama, decoder: BatchDecoder) -> None:
    runs = [decoder.start(tokens_of(llm, text), GREEDY, 0) for text in PROMPTS]
    with pytest.raises(NoFreeSlot):
        decoder.start(tokens_of(llm, PROMPTS[0]), GREEDY, 0)
    decoder.finish(runs[1])
    assert decoder.start(tokens_of(llm, PROMPTS[1]), GREEDY, 0).slot is runs[1].slot
