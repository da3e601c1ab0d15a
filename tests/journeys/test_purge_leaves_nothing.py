"""Deleted for good leaves nothing (issue 27, item 4 and its habit): after a chat is deleted for good —
`ember-chat chats rm --purge`, Chat ▸ Delete all chats… in the window, 30 days in the Trash — no file under
the data folder holds its words or its tokens: not the database (read as bytes, its WAL too: messages,
search index, tool grants and results), not its attachment's file, not the saved conversation caches
(`kv-snapshots/*.kvsnap`, which hold tokens, not text), and the model keeps none of it in memory (its RAM
caches, its live sequences) to write there later. Backups are the user's own copies (README, "Where your
data lives"): a deletion for good leaves them as they are, and the dialogs and the command line say so.

The caches are made by the real runtime on the tiny model (tests/helpers/gguf_factory.py), the purges go through
the installed `ember-chat` and the real window."""

from __future__ import annotations

import io
import subprocess
import threading
from array import array
from collections.abc import Callable
from pathlib import Path

from PIL import Image
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.attachments import AttachmentStore, read_attachment_bytes
from ember_chat.engine.core.messages import ChatMessage, ImageInput
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.core.tools import ChatTools, ToolCall, ToolResult
from ember_chat.engine.inference.kv.snapshots import SnapshotStore
from ember_chat.engine.inference.metrics import GenerationMetrics
from ember_chat.engine.inference.service.engine import EngineService, GenerationRequest
from ember_chat.engine.storage.backups import BackupManager
from ember_chat.engine.storage.conversations import TRASH_DAYS, ConversationStore
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.entry_point import ember_chat
from tests.helpers.presets_cli import _env
from tests.helpers.runtime_support import loaded
from tests.helpers.sinks import RecordingSink
from tests.helpers.vision_factory import write_tiny_vision_model
from tests.helpers.window import load, send, set_max_tokens

GREEDY = SamplingParams(temperature=0.0, max_tokens=4)


def long_message(secret: str) -> str:
    """Over 256 tokens (worth a cache), sharing no more than the chat template's first tokens with another
    secret's message."""
    return f"{secret} is my locker code. " + " ".join(f"{secret} opens locker {i}." for i in range(14))


def token_probe(tokenize: Callable[[str], list[int] | None], secret: str) -> bytes:
    """The secret's tokens as a snapshot file stores them (int32, little-endian), without the first and
    last (which may merge with the text around it)."""
    tokens = tokenize(f" {secret} ")
    assert tokens is not None and len(tokens) > 4
    packed = array("i", tokens[1:-1])
    assert packed.itemsize == 4
    return packed.tobytes()  # (little-endian on the machines that run the suite; kv_snapshot_files swaps on others)


def holding(data_dir: Path, secrets: dict[str, bytes]) -> dict[str, set[str]]:
    """For each file under the data folder (bytes, whatever it is) that holds a secret's words (any case:
    the search index lower-cases them) or its tokens: which secrets."""
    found: dict[str, set[str]] = {}
    for file in sorted(p for p in data_dir.rglob("*") if p.is_file()):
        data = file.read_bytes()
        lower = data.lower()
        hits = {s for s, probe in secrets.items() if s.lower().encode() in lower or probe in data}
        if hits:
            found[file.relative_to(data_dir).as_posix()] = hits
    return found


def cached_chat(
    store: ConversationStore, atts: AttachmentStore, model: Path, data_dir: Path, secret: str
) -> tuple[int, bytes]:
    """A chat whose long message, attached file, tool grant and tool result hold `secret`, answered by the
    model as the window answers it, its conversation cache saved in the data folder (as at quit). Returns
    (chat id, token probe)."""
    conv = store.create_conversation(f"Locker {secret}")
    text = long_message(secret)
    question = store.add_message(conv.id, "user", text)
    note = atts.save(read_attachment_bytes("locker.txt", f"The code, once more: {secret}.".encode()))
    atts.link(question.id, [note.id])
    caches = SnapshotStore(data_dir / "kv-snapshots", cap_bytes=2**30)
    with loaded(model, n_ctx=1024) as rt:
        rt.snapshots = caches
        probe = token_probe(rt.tokenize, secret)
        said = "".join(getattr(e, "text", "") for e in rt.chat([ChatMessage("user", text)], GREEDY))
    caches.close()  # (the model's close put its conversation in the store; this writes it)
    answer = store.add_message(conv.id, "assistant", said or "…", parent_id=question.id)
    grant = f"open_{secret.lower()}"  # the chat's tool grants, a call and its result
    store.set_chat_tools(conv.id, ChatTools(frozenset({grant}), frozenset({grant})))
    call = ToolCall("call00001", grant, {"locker": 3}, '{"locker": 3}')
    store.set_tool_calls(answer.id, [call])
    store.set_tool_result(answer.id, ToolResult(call.id, grant, f"opened with {secret}"), source="Built-in")
    return conv.id, probe


def test_chats_rm_purge_leaves_no_word_or_token_of_the_chat_outside_the_backups(
    tiny_model: Path, tmp_path: Path
) -> None:
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    store = ConversationStore(paths.database)
    atts = AttachmentStore(paths, store)
    kept = store.create_conversation("Groceries")
    store.add_message(kept.id, "user", "apples and pears")
    cid, probe = cached_chat(store, atts, tiny_model, paths.data_dir, "Quuxbarnacle")
    backup = BackupManager(store).backup()
    store.close()
    secrets = {"Quuxbarnacle": probe}
    before = holding(paths.data_dir, secrets)
    assert len([f for f in before if f.startswith("kv-snapshots/")]) == 1  # (the probe finds its tokens)
    assert "chats.sqlite3" in before and any(f.startswith("attachments/") for f in before)

    done = subprocess.run(
        [ember_chat(), "chats", "rm", "--purge", str(cid)],
        capture_output=True, text=True, env=_env(tmp_path), timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Deleted 1 chat for good" in done.stdout and "conversation caches" in done.stdout
    assert "backups" in done.stdout  # (they still hold it: said, and left as they are)

    after = holding(paths.data_dir, secrets)
    assert all(f.startswith("backups/") for f in after), after
    assert backup.path.relative_to(paths.data_dir).as_posix() in after  # the user's copy is theirs
    assert not list((paths.data_dir / "kv-snapshots").iterdir())  # (found by tokens, not by chat: all go)
    again = ConversationStore(paths.database)
    assert [c.title for c in again.conversations()] == ["Groceries"]
    again.close()


def test_chats_old_enough_to_leave_the_trash_at_open_take_their_caches_with_them(
    tiny_model: Path, tmp_path: Path
) -> None:
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    long_ago = ConversationStore(paths.database, clock=lambda: 1_000_000.0)
    cid, probe = cached_chat(long_ago, AttachmentStore(paths, long_ago), tiny_model, paths.data_dir, "Zorblefrump")
    long_ago.organise.trash_chats([cid])
    long_ago.close()
    assert holding(paths.data_dir, {"Zorblefrump": probe}).keys() >= {"chats.sqlite3"}
    assert list((paths.data_dir / "kv-snapshots").glob("*.kvsnap"))

    opened = ConversationStore(paths.database)  # Ember starts: chats over TRASH_DAYS in the Trash go
    try:
        assert opened.organise.trashed() == [] and TRASH_DAYS < 365
        assert holding(paths.data_dir, {"Zorblefrump": probe}) == {}
    finally:
        opened.close()


def test_deleted_messages_take_the_caches_with_them_when_the_store_closes(tiny_model: Path, tmp_path: Path) -> None:
    """A deleted message can be undone while Ember runs, so its words and caches stay until the store closes
    (as Ember quits); then the privacy sweep takes both."""
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    store = ConversationStore(paths.database)
    cid, probe = cached_chat(store, AttachmentStore(paths, store), tiny_model, paths.data_dir, "Frobnoodle")
    (first,) = [m for m in store.messages(cid) if m.parent_id is None]
    store.organise.delete_messages(first.id)
    assert list((paths.data_dir / "kv-snapshots").glob("*.kvsnap"))  # (the undo may still want it)
    store.close()
    left = holding(paths.data_dir, {"Frobnoodle": probe})
    assert list(left) == ["chats.sqlite3"]  # its title ("Locker Frobnoodle") only: the chat stays


def _answer(
    service: EngineService, text: str, images: tuple[ImageInput, ...] = (), **params: object
) -> GenerationMetrics:
    sink = RecordingSink()
    params = {"temperature": 0.0, "max_tokens": 4, **params}
    messages = [ChatMessage("user", text, images=images)]
    service.submit(GenerationRequest(SamplingParams(**params), sink, messages=messages, client="api"))
    assert sink.done.wait(120)
    assert sink.final is not None
    return sink.final


def test_the_engine_forgets_every_conversation_it_holds_and_saves_none_of_them_at_close(
    tiny_model: Path, tmp_path: Path
) -> None:
    """What a running Ember keeps: the batch slots (plain requests, parallel 2), seq 0 (a request with
    log-probabilities runs there), the snapshot store in RAM and on disk. `forget_conversations` drops them
    all, none saved: each prompt comes back evaluated from scratch, and closing writes nothing."""
    folder = tmp_path / "kv-snapshots"
    caches = SnapshotStore(folder, cap_bytes=2**30)
    service = EngineService()
    service.snapshot_store = caches
    try:
        service.load(LoadConfig(tiny_model, n_ctx=4096, threads=1, parallel=2))
        service.run_exclusive(lambda: None).result(120)  # (after the load)
        assert service.model is not None
        on_disk, also_on_disk, in_ram, live = (long_message(s) for s in ("Snick", "Glimm", "Blorp", "Wibbl"))
        _answer(service, on_disk)  # a slot
        _answer(service, also_on_disk)  # another
        _answer(service, in_ram, logprobs=1)  # seq 0: the slots' conversations saved (RAM)
        assert caches.flush(30) and len(list(folder.glob("*.kvsnap"))) == 2
        _answer(service, live)  # a slot again: seq 0's conversation saved (RAM)
        assert caches.usage()[0] == 3
        assert _answer(service, live, max_tokens=1).prompt_tokens_reused > 256  # (held: reused)

        service.forget_conversations().wait(60)
        assert caches.usage() == (0, 0) and not list(folder.iterdir())
        m = _answer(service, live, max_tokens=1)  # the first after: no slot holds anything
        assert (m.prompt_tokens_reused, m.prompt_tokens_restored) == (0, 0)
        m = _answer(service, in_ram, max_tokens=1, logprobs=1)  # nor seq 0, nor the store
        assert (m.prompt_tokens_reused, m.prompt_tokens_restored) == (0, 0)
        for text in (on_disk, also_on_disk):
            m = _answer(service, text, max_tokens=1, logprobs=1)
            assert m.prompt_tokens_restored == 0 and m.prompt_tokens_reused < 32  # (the template's first tokens)
        service.forget_conversations().wait(60)  # (those asked again)
    finally:
        service.close()
        caches.close()  # (what the model's close put in the store would be written now)
    assert not list(folder.glob("*.kvsnap"))


def test_the_engine_forgets_the_images_it_has_seen(tmp_path: Path) -> None:
    """A vision model keeps each image's embedding in memory (a follow-up does not encode it again):
    after a deletion for good the same image is encoded anew, none of it kept (it was served from the
    cache: image_encode_ms 0)."""
    model, mmproj = write_tiny_vision_model(tmp_path)
    buf = io.BytesIO()
    Image.new("RGB", (40, 30), (255, 0, 0)).save(buf, "PNG")
    photo = (ImageInput.from_bytes(buf.getvalue(), "locker.png"),)
    service = EngineService()
    try:
        service.load(LoadConfig(model, mmproj=mmproj, n_ctx=1024, threads=1))
        assert (_answer(service, "What is this?", photo).image_encode_ms or 0) > 0
        assert _answer(service, "And this?", photo).image_encode_ms == 0  # (from the cache)
        service.forget_conversations().wait(60)
        assert (_answer(service, "And this?", photo).image_encode_ms or 0) > 0
    finally:
        service.close()


def test_forget_asked_while_the_engine_closes_still_leaves_nothing(tiny_model: Path, tmp_path: Path) -> None:
    """A deletion for good just before quitting: the engine may close before its turn came; its close then
    drops the conversations instead of saving them, and the event is set."""
    folder = tmp_path / "kv-snapshots"
    caches = SnapshotStore(folder, cap_bytes=2**30)
    service = EngineService()
    service.snapshot_store = caches
    service.load(LoadConfig(tiny_model, n_ctx=1024, threads=1))
    _answer(service, long_message("Wibblestone"), logprobs=1)
    gate = threading.Event()
    service.run_exclusive(lambda: gate.wait(60))  # the engine busy: the forget waits its turn
    done = service.forget_conversations()
    closer = threading.Thread(target=service.close)
    closer.start()
    gate.set()
    closer.join(60)
    assert not closer.is_alive() and done.wait(5)
    caches.close()
    assert not list(folder.glob("*.kvsnap"))


def test_delete_all_chats_in_the_window_then_quit_leaves_no_word_or_token_of_them(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    """A long chat answered by the tiny model, Ember closed (its cache written), opened again, another long
    chat (held by the model). Chat ▸ Delete all chats… (its question says the caches go too), then quit:
    not a word or token of either under the data folder but in the backup made at the second start."""
    secrets: dict[str, bytes] = {}
    for secret in ("Quuxbarnacle", "Zorblefrump"):
        w = make_window()
        load(qtbot, w)
        w.side.params.temperature.setValue(0)
        set_max_tokens(w, 4)
        w.chats.new_chat()
        send(qtbot, w, long_message(secret))
        secrets[secret] = token_probe(w.bridge.service.tokenize, secret)
        if len(secrets) == 1:
            w.close()
            assert w.join_background(30)
            w.store.close()
            cached = holding(paths.data_dir, secrets)
            assert [f for f in cached if f.startswith("kv-snapshots/")]  # (written at quit; the probe finds it)

    chat_menu = next(a.menu() for a in w.menuBar().actions() if a.text().replace("&", "") == "Chat")
    next(a for a in chat_menu.actions() if a.text().replace("&", "") == "Delete all chats…").trigger()
    box = w.chats.chat_question
    assert "saved conversation caches are cleared" in box.text() and "Backups made earlier" in box.text()
    with qtbot.waitSignal(w.tasks.settled, timeout=20_000):
        next(b for b in box.buttons() if b.text() == "Delete all chats").click()
    assert w.kv_caches.store.usage() == (0, 0)  # the saved ones went with the chats, off the GUI thread
    assert not list((paths.data_dir / "kv-snapshots").iterdir())
    w.close()  # quitting writes the caches the model holds: there are none left to write
    left = holding(paths.data_dir, secrets)
    assert left and all(f.startswith("backups/") for f in left), left  # (today's backup, made at the 2nd start)
