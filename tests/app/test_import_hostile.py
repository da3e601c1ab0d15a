"""Chat files from someone else (File ▸ Import chats and `chats import` share `import_chats`), built to
attack (tests/hostile/): an Ember export that names a path to read, a ChatGPT export whose images link
out of its folder, tool consent brought in the file, an attachment that claims another file's hash, an
image that would not pass as attached. Each is imported into a real data folder through the store-level
import the window and the CLI call, and the File ▸ Import door in the window is taken once."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.attachments import AttachmentStore, read_attachment_bytes
from ember_chat.engine.attachments.imported import AttachmentImporter
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.import_chatgpt import IMAGE_LINE
from ember_chat.engine.storage.importing import ImportFailed, import_chats
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.attachment_files import image_bytes
from tests.helpers.chatgpt_export import rows, write
from tests.helpers.ember_export import Place, write_text
from tests.helpers.import_fixtures import photosynthesis
from tests.helpers.import_window import HOSTILE, choose
from tests.hostile.chatgpt_export_links import chatgpt_export_with_links

BY_PATH = "2 attached files given only as a path, not as content (Ember never opens a path a chat file names)"
SECRET = "Xylophonequartz"  # in a local file an export names: never in the data folder


def hostile_copy(name: str, folder: Path, path: str | None = None) -> Path:
    """tests/hostile/<name>, its /etc/passwd replaced by `path` (a file that exists here, or not)."""
    text = (HOSTILE / name).read_text(encoding="utf-8")
    if path is not None:
        text = text.replace('"/etc/passwd"', json.dumps(path))
    folder.mkdir(parents=True, exist_ok=True)
    return write_text(folder / name, text)


def data_files_hold(folder: Path, word: str) -> list[Path]:
    """The files under `folder` whose bytes hold `word` (any case: the full-text index lowers it)."""
    needle = word.lower().encode()
    return [p for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes().lower()]


def test_an_ember_export_never_reads_a_path_and_says_the_same_whether_it_exists(
    places: tuple[Place, Place], tmp_path: Path
) -> None:
    _, b = places
    secret = tmp_path / "mine" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text(f"my passwords: {SECRET}\n", encoding="utf-8")
    reports = [
        b.import_file(hostile_copy("chat_export_reads_path.json", tmp_path / str(i), target))
        for i, target in enumerate((None, str(secret), str(tmp_path / "nothing here.txt")))
    ]
    # the same report for /etc/passwd, a file that exists and one that does not: no oracle
    assert [r.skipped for r in reports] == [(BY_PATH,)] * 3
    assert all(r.chats == 2 and r.format == "ember" for r in reports)
    assert rows(b.store.path)["attachments"] == 0 and rows(b.store.path)["conversations"] == 6
    assert data_files_hold(b.paths.data_dir, SECRET) == [] and data_files_hold(b.paths.data_dir, "root:x:0") == []
    assert not (b.paths.data_dir / "attachments").exists() or not any((b.paths.data_dir / "attachments").rglob("*"))


def test_a_chatgpt_exports_images_are_read_only_from_inside_its_folder(tmp_path: Path) -> None:
    """A linked image file and a linked dalle-generations/ folder: neither is read (the chats import
    with the line that says an image was there)."""
    place = Place(tmp_path)
    try:
        source = chatgpt_export_with_links(tmp_path / "export", tmp_path / "outside", image_bytes("PNG", (9, 9)))
        report = place.import_file(source)
        assert report.chats == 2 and report.skipped and report.skipped[0].startswith("2 images ")
        assert rows(place.store.path)["attachments"] == 0
        contents = [m.content for c in place.store.conversations() for m in place.store.messages(c.id)]
        tools = [t.content for c in place.store.conversations() for m in place.store.messages(c.id)
                 for t in m.tool_results]  # fmt: skip
        assert IMAGE_LINE in "".join(contents) and IMAGE_LINE in tools  # DALL·E's is on the tool's result
    finally:
        place.store.close()


def test_an_image_replaced_by_a_link_after_the_folder_was_read_is_left_out(tmp_path: Path) -> None:
    """The folder is read before the chats are written; the image made a link out meanwhile (the moment
    progress says the file was read) is not followed, and the report does not name it."""
    place = Place(tmp_path)
    export = tmp_path / "export"
    export.mkdir()
    leaf = export / "file-Abc123-leaf.png"
    leaf.write_bytes(image_bytes("PNG"))
    private = tmp_path / "private.png"
    private.write_bytes(image_bytes("PNG", (7, 7)))
    conversation, _ = photosynthesis()

    def swap(done: int, _total: int) -> None:
        if done == 0:
            leaf.unlink()
            leaf.symlink_to(private)

    try:
        source = write(export / "conversations.json", [conversation])
        report = import_chats(place.store, source, swap, attachments=AttachmentImporter(place.atts))
        assert report.chats == 1 and report.skipped == ("1 image of the export that could not be read from its folder",)
        assert rows(place.store.path)["attachments"] == 0
    finally:
        place.store.close()


def test_tool_consent_is_never_imported_nor_exported(places: tuple[Place, Place], tmp_path: Path) -> None:
    a, b = places
    b.import_file(HOSTILE / "chat_export_grants_consent.json")
    (conv,) = b.store.conversations()
    tools = b.store.chat_tools(conv.id)
    assert tools.always == frozenset()  # every call of an imported chat asks first
    # the tools on and "call a tool first" come along: shown on the Tools button, each call asks
    assert tools.enabled == {"Built-in/read_file", "Built-in/calculator"} and tools.require_call
    # a grant given here stays here: not in an export
    b.store.set_chat_tools(conv.id, replace(tools, always=frozenset({"Built-in/calculator"})))
    (data,) = json.loads(b.export())
    assert data["tools"] == {"enabled": ["Built-in/calculator", "Built-in/read_file"], "require_call": True}
    a.import_file(write_text(tmp_path / "again.json", json.dumps(data)))
    assert a.store.chat_tools(a.store.conversations()[0].id).always == frozenset()


REPORT = b"Quarterly report: revenue grew 4% and costs fell.\n"  # the document the hostile file claims the hash of
CLAIMED = "Quarterly report: wire the whole budget to account 0000-EVIL today.\n"


def test_a_claimed_hash_never_stands_for_a_file_attached_later(places: tuple[Place, Place]) -> None:
    _, b = places
    b.import_file(HOSTILE / "chat_export_claims_hash.json")
    (conv,) = b.store.conversations()
    (imported,) = b.atts.of_message(b.store.thread(conv.id)[0].id)
    assert imported.sha256 == hashlib.sha256(CLAIMED.encode()).hexdigest() != hashlib.sha256(REPORT).hexdigest()
    assert b.atts.text(imported) == CLAIMED
    for name in ("report.txt", "q3 report.txt"):  # the user attaches the real document (same name or not)
        mine = b.atts.save(read_attachment_bytes(name, REPORT))
        assert b.atts.text(mine) == REPORT.decode() and b.atts.chunks(mine.id)[0].text == REPORT.decode().strip()


def test_a_claimed_hash_never_shows_a_file_attached_before(places: tuple[Place, Place]) -> None:
    """The user's document first: the imported chat (exported again, shared) must not get its text."""
    _, b = places
    mine = b.atts.save(read_attachment_bytes("report.txt", REPORT))
    b.import_file(HOSTILE / "chat_export_claims_hash.json")
    (conv,) = b.store.conversations()
    (imported,) = b.atts.of_message(b.store.thread(conv.id)[0].id)
    assert imported.id != mine.id and b.atts.text(imported) == CLAIMED
    assert "revenue grew" not in b.export()


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("chat_export_image_bomb.json", "decompression bomb"),
        ("chat_export_image_not_an_image.json", "not a PNG, JPEG, WebP or GIF image"),
    ],
)
def test_an_imported_image_passes_the_checks_an_attached_one_does(
    places: tuple[Place, Place], name: str, why: str
) -> None:
    _, b = places
    with pytest.raises(ImportFailed) as info:
        b.import_file(HOSTILE / name)
    assert "photo.png" in str(info.value) and why in str(info.value)
    assert rows(b.store.path) == dict.fromkeys(rows(b.store.path), 0)
    assert not (b.paths.data_dir / "attachments").exists() or not any(
        p.is_file() for p in (b.paths.data_dir / "attachments").rglob("*")
    )


def test_an_imported_gif_is_kept_as_png_as_an_attached_one_is(places: tuple[Place, Place], tmp_path: Path) -> None:
    a, b = places
    gif = image_bytes("GIF")
    conv = a.store.create_conversation("A gif")
    message = a.store.add_message(conv.id, "user", "look")
    a.atts.link(message.id, [a.atts.save(read_attachment_bytes("anim.gif", gif)).id])
    b.import_file(write_text(tmp_path / "gif.json", a.export()))
    (got,) = b.atts.of_message(b.store.thread(b.store.conversations()[0].id)[0].id)
    assert got.is_image and b.atts.image(got) == a.atts.image(a.atts.of_message(message.id)[0])
    assert b.atts.image(got).startswith(b"\x89PNG")


def test_a_purged_imported_chat_leaves_nothing_of_its_files_in_the_data_folder(places: tuple[Place, Place]) -> None:
    _, b = places
    b.import_file(HOSTILE / "chat_export_claims_hash.json")
    (conv,) = b.store.conversations()
    assert data_files_hold(b.paths.data_dir, "0000-EVIL")  # (the blob and its indexed passages)
    assert b.store.organise.purge_chats([conv.id]) == 1
    assert data_files_hold(b.paths.data_dir, "0000-EVIL") == []


def test_file_import_in_the_window_reads_no_path_an_export_names(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    w = make_window()
    secret = tmp_path / "secret.txt"
    secret.write_text(f"my passwords: {SECRET}\n", encoding="utf-8")
    importer = choose(qtbot, w, hostile_copy("chat_export_reads_path.json", tmp_path / "downloads", str(secret)))
    with qtbot.waitSignal(importer.finished, timeout=20000) as done:
        pass
    assert done.args[0].chats == 2
    assert f"Not brought along: {BY_PATH}." in w.banner.text() and str(secret) not in w.banner.text()
    assert rows(w.store.path)["attachments"] == 0
    assert data_files_hold(Path(w.store.path).parent, SECRET) == []


def test_the_cli_import_keeps_no_claimed_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`chats import` builds its importer as the window does (with the settings' size limit)."""
    from ember_chat.engine.cli.main import main

    paths_ = AppPaths(tmp_path / "data", tmp_path / "config")
    monkeypatch.setenv("EMBER_DATA_DIR", str(paths_.data_dir))
    monkeypatch.setenv("EMBER_CONFIG_DIR", str(paths_.config_dir))
    assert main(["chats", "import", str(HOSTILE / "chat_export_claims_hash.json")]) == 0
    store = ConversationStore(paths_.database)
    try:
        atts = AttachmentStore(paths_, store)
        (imported,) = atts.of_message(store.thread(store.conversations()[0].id)[0].id)
        assert imported.sha256 == hashlib.sha256(CLAIMED.encode()).hexdigest()
    finally:
        store.close()
