"""Screenshots of the real window for CI artifacts and the README:

    PYTHONPATH=. xvfb-run -a -s "-screen 0 1920x1080x24" .venv/bin/python packaging/screenshots.py OUT_DIR

(run from the repository root; PYTHONPATH=. lets it use the tests' peer servers, `tests.helpers.peer_servers`)

In a fresh data folder it loads the starter model (SmolLM2 135M Instruct, a chat model) and asks it one
question (a real answer with real metrics), then shows that chat at 1280×800, on small screens (1024×640
with the side panel, 800×600 without) and at 1920×1080, in the light and dark themes, the dark theme's
dialogs (delete and rename a chat), a chat whose answer is code-heavy Markdown and one with a reasoning
model's thinking (texts written into the database by this script, to show the rendering: no model wrote
them), the Model Manager, the error banner after trying to load a damaged model file, and the benchmark
lab after measuring two models: the starter model here, and the same file served by llama-cpp-python's
own server on 127.0.0.1 as a remote connection. Issue 19's parts (data written by
packaging/screenshot_data.py): the chat list with 30 chats in folders, pins, a collapsed folder and 2 chats
in the Trash, the preset library, the backups list, two tiny local models compared side by side (greedy,
so always the same answers), and an answer with typeset formulas. Issue 28's fixed states: an empty
chat's greeting, a message sent with Enter while an answer streams (queued, the banner says so), the
attachments' compact strip at 800×600, the drop zone, a sent PDF's preview (the text the model was given,
the passages it used marked), the side panel's chart after a long prompt, Tab on a message's actions, the
chat list's right-clicked row and its menu, the Tools popup at 1024×640 with a server and the built-in
tools, one Settings window with sections (dark, and its Conversation caches page: memory and disk apart),
and a damaged model's Load error inside the Model Manager. Issue 34: a project's settings (dark), its
knowledge folder indexed with one file skipped.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
import wave
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import screenshot_data as data  # (packaging/, beside this script)

SERVED = "smollm2-135m-q4_1"  # the starter, served by llama-cpp-python (its file, another name)
ROOT = Path(__file__).resolve().parent.parent  # the checkout (the tests' MCP server)

CODE_QUESTION = "How do I merge two sorted lists in Python, and how fast is it?"
CODE_ANSWER = """Use `heapq.merge` for iterators, or a two-pointer loop when you want a list back:

```python
def merge(a: list[int], b: list[int]) -> list[int]:
    \"\"\"Merge two sorted lists in O(len(a) + len(b)).\"\"\"
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            out.append(a[i]); i += 1
        else:
            out.append(b[j]); j += 1
    return out + a[i:] + b[j:]  # one side is empty
```

| approach | time | memory |
|---|---|---|
| two pointers | O(n + m) | O(n + m) |
| `sorted(a + b)` | O((n + m) log(n + m)) | O(n + m) |
| `heapq.merge` | O(n + m) | O(1) extra, lazy |

> Timsort detects the two runs in `sorted(a + b)`, so in practice it is close to linear too.

From the shell, the same with coreutils:

```bash
sort -m a.txt b.txt > merged.txt
```

See the [heapq documentation](https://docs.python.org/3/library/heapq.html#heapq.merge) for details."""


THINK_QUESTION = "Is 1001 a prime number?"
THINK_ANSWER = """<think>
1001 = 7 × 143, and 143 = 11 × 13. So it has divisors other than 1 and itself.
</think>

No: **1001 = 7 × 11 × 13**, so it is not prime."""


def main(out_dir: str) -> int:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="ember-shots-"))
    os.environ["EMBER_DATA_DIR"] = str(home / "data")
    os.environ["EMBER_CONFIG_DIR"] = str(home / "config")

    from PySide6.QtCore import Qt, QTimer
    from PySide6.QtGui import QColor, QImage
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    from ember_chat.app.main import build_window
    from ember_chat.app.style.theme import app_icon
    from ember_chat.app.transcript.tool_cards import ALWAYS
    from ember_chat.engine.storage.connections import Connection, ConnectionStore
    from ember_chat.engine.storage.conversations import ConversationStore
    from ember_chat.engine.storage.paths import AppPaths
    from ember_chat.engine.tools.config import BuiltinToolsConfig, McpServerConfig, ToolsConfig, ToolsConfigFile
    from tests.helpers.attachment_files import write_pdf
    from tests.helpers.microphone import InjectedMicrophone
    from tests.helpers.peer_servers import free_port, llama_cpp_server
    from tests.helpers.speech import SENTENCES, speak

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setStyle("Fusion")
    app.setWindowIcon(app_icon())
    paths = AppPaths.default()
    paths.data_dir.mkdir(parents=True)
    store = ConversationStore(paths.database)
    code_chat = store.create_conversation("Merge two sorted lists")
    q = store.add_message(code_chat.id, "user", CODE_QUESTION)
    store.add_message(code_chat.id, "assistant", CODE_ANSWER, parent_id=q.id)
    think_chat = store.create_conversation("Is 1001 prime?")
    tq = store.add_message(think_chat.id, "user", THINK_QUESTION)
    think_answer = store.add_message(think_chat.id, "assistant", THINK_ANSWER, parent_id=tq.id)
    math_chat = data.math_chat(store)
    store.close()
    # tools: the built-in calculator, and an MCP server (the tests' own, written with the official SDK)
    notes = McpServerConfig("notes", command=sys.executable, args=(str(ROOT / "tests" / "mcp_servers" / "normal.py"),))
    ToolsConfigFile(paths.config_dir / "tools.json").save(
        ToolsConfig(servers=(notes,), builtin=BuiltinToolsConfig(calculator=True, datetime=True))
    )
    damaged = paths.default_models_dir / "damaged-download.gguf"
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 64)  # a header cut short

    window = build_window(paths)
    window.show()
    window.setGeometry(0, 0, 1280, 800)  # no window manager: the window sits where it is put

    def shot(name: str, widget: object = None) -> None:
        widget = widget or window
        pixmap = widget.screen().grabWindow(widget.winId()) if os.environ.get("QT_QPA_PLATFORM") == "xcb" else None
        if pixmap is None or pixmap.isNull():
            pixmap = widget.grab()
        pixmap.save(str(out / name))
        print(f"screenshot: {out / name}", file=sys.stderr)

    def settled() -> bool:
        t = window.transcript
        return not (window.controller.generating or t.rendering or t.backfilling)

    def shot_screen(name: str, widget: object = None) -> None:
        """What the screen shows over a window: its popups and menus too (top-level windows of their own,
        which a grab of the window leaves out)."""
        widget = widget or window
        box = widget.frameGeometry()
        pixmap = widget.screen().grabWindow(0, box.x(), box.y(), box.width(), box.height())
        if pixmap.isNull():
            pixmap = widget.grab()
        pixmap.save(str(out / name))
        print(f"screenshot: {out / name}", file=sys.stderr)

    def theme(name: str) -> None:
        """As the user picks it in View ▸ Theme (the Settings window's Appearance shows that choice)."""
        order = ("light", "dark", "system")
        window.theme_group.actions()[order.index(name)].trigger()

    def at(name: str) -> None:  # the step a timeout names
        state["step"] = name

    def open_chat(cid: int) -> None:
        window.chats.open_conversation(cid)
        # (the list's select() changes the selection with its signals blocked, so the view keeps the
        # previous chat's highlight until something repaints it: repainted here, reported to its owner)
        window.conversations.list.viewport().update()

    def organised() -> Iterator[Callable[[], bool]]:
        """The dark theme's chat list in folders, the preset library, the backups and a comparison."""
        at("chat-list-dark")
        listed = data.chat_list(window.store)
        window.chats.reload_conversations()
        yield settled
        shot("chat-list-dark.png")
        if listed != 30:
            raise SystemExit(f"chat-list-dark: {listed} chats listed, not 30")
        at("chat-list-menu-dark")
        rows = window.conversations.list
        row = rows.visualRect(rows.currentIndex()).center()  # (the open chat's row)
        window.chats.conversation_menu(row)  # (as a right-click opens it: the row it acts on is marked)
        yield lambda: window.chats.chat_menu is not None and window.chats.chat_menu.isVisible()
        shot_screen("chat-list-menu-dark.png")
        window.chats.chat_menu.close()
        yield lambda: window.chats.chat_menu is None
        at("project-settings-dark")  # a project's settings: its knowledge indexed, a skipped file (issue 34)
        thesis = data.project(window.store, home / "Thesis documents")
        window.chats.reload_conversations()
        knowledge = window.projects.indexing
        knowledge.run(thesis)
        yield lambda: not knowledge.running(thesis)
        window.projects.open_settings(thesis)
        project_dialog = window.projects.settings_dialog
        project_dialog.tabs.setCurrentWidget(project_dialog.knowledge)
        yield lambda: not window.tasks.busy and "passages" in project_dialog.knowledge.sources.topLevelItem(0).text(1)
        shot("project-settings-dark.png", project_dialog)
        project_dialog.close()
        yield lambda: window.projects.settings_dialog is None
        at("settings-window-dark")
        window.settings_window.open_section("appearance")
        window.settings_window.resize(900, 560)
        yield lambda: window.settings_window.isVisible()
        shot("settings-window-dark.png", window.settings_window)
        window.settings_window.close()
        yield lambda: not window.settings_window.isVisible()
        at("presets-dark")
        chosen = data.presets(window.presets.library)
        library = window.presets.open_dialog()  # (a page of the Settings window)
        library.select(chosen)
        window.settings_window.resize(1060, 600)
        yield lambda: library.isVisible() and len(library.names()) == 4  # (and the built-in Default)
        shot("presets-dark.png", window.settings_window)
        window.settings_window.close()
        yield lambda: not window.settings_window.isVisible()
        at("backups-dark")
        backups = window.backups.open_dialog()
        yield lambda: backups.isVisible() and backups.table.rowCount() == 1 and not backups.busy  # today's
        backups.back_up.click()
        yield lambda: backups.table.rowCount() == 2 and not backups.busy
        window.settings_window.resize(1000, 560)
        yield lambda: backups.isVisible()
        shot("backups-dark.png", window.settings_window)
        window.settings_window.close()
        yield lambda: not window.settings_window.isVisible()
        at("kv-caches-dark")
        window.settings_window.open_section("kv_caches")  # (a page of the Settings window)
        caches = window.kv_caches.dialog
        yield lambda: caches is not None and caches.isVisible() and "counting" not in caches.usage.text()
        shot("kv-caches-dark.png", window.settings_window)
        window.settings_window.close()
        yield lambda: not window.settings_window.isVisible()
        at("api-server-dark")  # the Local API server on, in a Settings window of a small screen's height
        api = window.api.open_dialog()
        api.enabled.setChecked(True)
        api.port.setValue(free_port())
        applied: list[bool] = []
        api.applied.connect(applied.append)
        api.apply()
        yield lambda: applied == [True] and window.api.running
        window.settings_window.resize(900, 600)
        yield lambda: api.isVisible() and api.copy_url.isVisible()
        laid_out = time.monotonic() + 0.5  # (the settings and the log share the height after the resize)
        yield lambda: time.monotonic() > laid_out
        shot("api-server-dark.png", window.settings_window)
        api.enabled.setChecked(False)
        api.apply()
        yield lambda: applied == [True, True] and not window.api.running
        window.settings_window.close()
        yield lambda: not window.settings_window.isVisible()
        at("compare-dark")
        tiny = data.tiny_models(paths.default_models_dir)
        window.models.reload_models()
        cid = window.store.create_conversation("Say hello").id
        prompt = window.store.add_message(cid, "user", data.COMPARE_QUESTION)
        window.chats.reload_conversations()
        open_chat(cid)
        yield settled
        window.side.params.temperature.setValue(0)  # (the chat's own values: what the comparison uses)
        window.side.params.max_tokens.setValue(12)
        window.side.params.seed.setValue(4242)
        compare = window.compare.open(prompt.id)
        compare.set_checked(list(tiny))
        ended: list[object] = []
        window.compare.run_ended.connect(ended.append)
        compare.start_button.click()
        yield lambda: bool(ended)
        yield lambda: window.model is not None and window.controller.model_ready  # the starter, back
        compare.resize(900, 440)
        compare.diff.setChecked(True)  # the second column's differences from the first
        yield lambda: compare.width() == 900
        shot("compare-dark.png", compare)
        compare.close()

    def dictating() -> Iterator[Callable[[], bool]]:
        """Dictation while it listens, at 1024x640: espeak-ng speech fed in real time through the window's
        Microphone (its device left out), a partial in the box after typed text, the listening line."""
        at("dictating")
        window.resize(1024, 640)
        mic = InjectedMicrophone()
        window.dictation.use_microphone(mic)
        wav = speak(" ".join(SENTENCES[:2]), home / "dictation.wav")
        with wave.open(str(wav)) as f:
            pcm = f.readframes(f.getnframes())
        editor = window.composer.editor
        editor.setPlainText("Note for the team: ")
        editor.moveCursor(editor.textCursor().MoveOperation.End)
        window.dictation.press()
        window.dictation.release()
        step = 2 * 22_050 * 3 // 10  # 0.3 s a tick (the loop pauses 0.3 s after each step)
        for at_byte in range(0, len(pcm) * 2 // 3, step):
            mic.feed_pcm(pcm[at_byte : at_byte + step])
            yield lambda: True
        yield lambda: "first words" in window.dictation.metrics_label.text() and len(editor.toPlainText()) > 30
        shot("dictating.png")
        window.dictation.press()  # (stop)
        window.dictation.release()
        yield lambda: not window.dictation.busy
        editor.clear()

    def steps() -> Iterator[Callable[[], bool]]:
        at("window-light: load the starter")
        window.models.load_model("starter")
        yield lambda: window.model is not None or not window.models.loading
        if window.model is None:
            raise SystemExit("the starter model did not load")
        at("chat-greeting")
        yield lambda: window.greeting.isVisible()
        shot("chat-greeting.png")
        window.side.params.max_tokens.setValue(160)  # room for its whole answer (about 70 tokens), not cut short
        window.side.params.temperature.setValue(0)
        at("window-light: the starter's answer")
        window.controller.send("Explain photosynthesis in simple words.")
        yield lambda: not window.controller.generating
        yield settled
        answer = window.store.thread(window.controller.conversation_id)[-1].content
        if answer.lower().count("plant") < 1 or len(answer) < 80:  # the README's first impression
            raise SystemExit(f"window-light: the starter's answer does not look sensible: {answer!r}")
        shot("window-light.png")
        for name, size, side_panel in (
            ("small-1024x640.png", (1024, 640), True),
            ("small-800x600.png", (800, 600), False),
            ("wide-1920x1080.png", (1920, 1080), True),
        ):
            if window.side.isVisible() != side_panel:
                window.toggle_side_panel()
            at(name)
            window.resize(*size)
            yield lambda size=size: (window.width(), window.height()) == size and settled()
            shot(name)
        yield from dictating()
        if not window.side.isVisible():
            window.toggle_side_panel()
        window.resize(1280, 800)
        at("window-dark")
        theme("dark")
        yield settled
        shot("window-dark.png")
        yield from organised()
        at("code-dark")
        open_chat(code_chat.id)
        yield settled
        shot("code-dark.png")
        # Files in a chat (dark): a PDF too long to read whole and an image the text-only starter
        # cannot see (its chip says so); then the answer about the PDF with its Sources
        window.chats.new_chat()
        filler = "\n".join(f"Line {i}: the annual report covers budgets, meetings and logistics." for i in range(30))
        pages = [f"Page {p + 1}\n{filler}" for p in range(40)]
        pages[26] += "\nThe secret harbour code is PELICAN-42."
        pdf = write_pdf(home / "annual-report.pdf", pages)
        picture = QImage(320, 200, QImage.Format.Format_RGB32)
        picture.fill(QColor(220, 60, 40))
        picture.save(str(home / "screenshot.png"))
        bar = window.composer.attachments
        window.composer.attach_paths([pdf, home / "screenshot.png"])
        yield lambda: len(bar.attachments()) == 2 and not bar.busy
        shot("attachments-chips-dark.png")
        at("attachments-strip-800x600")
        window.resize(800, 600)  # (the side panel steps aside by itself; the chips stay one compact row)
        yield lambda: (window.width(), window.height()) == (800, 600) and not window.side.isVisible()
        shot("attachments-strip-800x600.png")
        window.resize(1280, 800)
        yield lambda: window.width() == 1280 and window.side.isVisible()
        at("drop-overlay-dark")
        window.attach.drop_overlay.show_over()  # (what a drag of files over the chat shows)
        yield lambda: window.attach.drop_overlay.isVisible()
        shot("drop-overlay-dark.png")
        window.attach.drop_overlay.hide()
        bar.remove(bar.items[-1].key)
        window.side.params.max_tokens.setValue(40)
        window.composer.editor.setPlainText("What is the secret harbour code?")
        window.composer.button.click()  # (as the user sends: the chips go with the message)
        yield lambda: window.controller.generating
        at("enter-queued-while-streaming")
        window.composer.editor.setPlainText("And who wrote the report?")
        window.composer.submit()  # Enter while the answer streams: queued, out of the box
        yield lambda: not window.composer.editor.toPlainText() and window.banner.isVisible()
        shot("enter-queued-while-streaming.png")
        window.compose.drop_queued()  # (not sent: back in the box, which is cleared for the next shots)
        window.composer.editor.clear()
        window.banner.hide()
        yield lambda: not window.controller.generating
        yield settled
        shot("attachments-dark.png")
        at("chart-long-ttft-dark")
        shot("chart-long-ttft-dark.png", window.side)  # (the 40-page PDF's prompt before the first token)
        at("attachment-preview-dark")
        asked = [m for m in window.store.thread(window.controller.conversation_id) if m.role == "user"][-1]
        window.transcript.action.emit("attachment", asked.id, 0)  # (a click on the sent PDF's chip)
        sent = window.transcript.attachments
        yield lambda: sent.dialog is not None and sent.dialog.isVisible()
        preview = sent.dialog
        preview.resize(760, 560)
        yield lambda: preview.width() == 760
        shot("attachment-preview-dark.png", preview)
        preview.close()
        for name, ask in (
            ("dialog-delete-dark.png", window.chats.delete_chat),
            ("dialog-rename-dark.png", window.chats.rename_chat),
        ):  # the dark theme's dialogs: a message box and an input dialog, as the chat list opens them
            ask(code_chat.id)
            yield lambda: window.chats.chat_question is not None and window.chats.chat_question.isVisible()
            shot(name, window.chats.chat_question)
            window.chats.chat_question.reject()
            yield lambda: window.chats.chat_question is None
        # Tools (dark): the calculator on in a new chat and the starter (a tiny model) made to call a tool
        # first: the consent card, then allowed: the call's card with its result, and the continuation
        window.chats.new_chat()
        yield lambda: any(e.key == "Built-in/calculator" for e in window.tools.registry.entries())
        window.tools.choices.set_tool_on("Built-in/calculator", True)
        window.tools.choices.set_require_call(True)
        window.side.params.temperature.setValue(0)  # (a new chat starts from the default parameters)
        window.side.params.max_tokens.setValue(120)
        window.controller.send("Calculator: 17.5 * 4")
        tools = window.controller.tools

        def waiting() -> bool:
            return tools.round is not None and any(p.result is None for p in tools.round.pendings)

        yield lambda: waiting() or not window.controller.generating
        yield lambda: not window.transcript.rendering
        shot("tools-consent-dark.png")
        if waiting():  # (more calls then run unasked, up to the cap)
            tools.on_action(ALWAYS, tools.round.answer.id, 0)
        yield lambda: not window.controller.generating
        yield settled
        shot("tools-dark.png")
        at("tools-popup-1024x640")
        window.resize(1024, 640)
        yield lambda: (window.width(), window.height()) == (1024, 640) and settled()
        button = window.tools.choices.button
        button.open_popup()  # (filled again, a new popup, whenever the tools listed change)
        yield lambda: button.frame.isVisible() and button.popup is not None and button.popup.isVisible()
        yield lambda: "notes/add" in button.popup.boxes  # (the server started by the popup, its tools listed)
        shot_screen("tools-popup-1024x640.png")
        button.frame.hide()
        window.resize(1280, 800)
        yield lambda: window.width() == 1280
        dialog = window.tools.open_dialog()  # (a page of the Settings window)
        window.settings_window.resize(1100, 620)
        yield lambda: dialog.isVisible() and window.tools.server_state("notes")[0] == "running"
        shot("tools-settings-dark.png", window.settings_window)
        window.settings_window.close()
        yield lambda: not window.settings_window.isVisible()
        at("math-light")
        theme("light")
        open_chat(math_chat)
        yield settled
        shot("math-light.png")
        at("code-light")
        open_chat(code_chat.id)
        yield settled
        shot("code-light.png")
        at("transcript-tab-focus")
        window.transcript.setFocus()
        QTest.keyClick(window.transcript, Qt.Key.Key_Tab)  # (Tab walks the messages' actions, the first marked)
        yield settled  # (without a window manager the window is never active: its focus is not waited for)
        shot("transcript-tab-focus.png")
        manager = window.models.model_manager()
        manager.resize(980, 640)
        manager.show()
        yield lambda: manager.isVisible()
        shot("model-manager.png", manager)
        at("model-manager-damaged")
        manager.tabs.setCurrentIndex(1)  # Installed
        yield lambda: manager.select_installed(damaged.name)
        window.models.load_model(damaged.name)  # (Load on the damaged row: its error shows in the Manager)
        yield lambda: manager.banner.isVisible() and not window.models.loading
        shot("model-manager-damaged.png", manager)
        manager.close()
        window.banner.hide()
        window.models.reload_models()
        window.models.load_model(damaged.name)
        yield lambda: window.banner.isVisible()
        shot("error-banner.png")
        window.banner.hide()
        open_chat(think_chat.id)
        window.transcript.action.emit("think", think_answer.id, 0)  # the fold, opened
        yield settled
        shot("thinking.png")
        url = servers.enter_context(llama_cpp_server(window.library.resolve("starter"), alias=SERVED))
        ConnectionStore(paths.connections_file).save(Connection("llama-cpp-python", url, SERVED, models=(SERVED,)))
        window.models.reload_models()
        window.models.open_benchmark()
        lab = window.models.benchmark
        for i in range(lab.models.count()):
            if lab.models.item(i).data(Qt.ItemDataRole.UserRole) in ("starter", f"remote:llama-cpp-python/{SERVED}"):
                lab.models.item(i).setCheckState(Qt.CheckState.Checked)
        lab.lengths.setText("64,128,256")
        lab.output.setValue(16)
        lab.reps.setValue(1)
        done = []
        lab.run_finished.connect(lambda: done.append(True))
        lab.start()
        yield lambda: bool(done)
        shot("benchmark.png", lab)
        lab.close()

    servers = contextlib.ExitStack()  # the llama-cpp-python server, stopped when the loop ends
    plan = steps()
    state: dict[str, Any] = {"wait": lambda: True, "step": "start"}
    deadline = time.monotonic() + 285  # (CI stops the run at 300 s)

    def tick() -> None:
        if time.monotonic() > deadline:
            line = getattr(state["wait"], "__code__", None)
            where = f" (waiting at packaging/screenshots.py:{line.co_firstlineno})" if line else ""
            print(f"screenshots: timed out in step {state['step']}{where}", file=sys.stderr)
            app.exit(1)
            return
        if not state["wait"]():
            return
        pause_until = time.monotonic() + 0.3  # let the last paint land
        while time.monotonic() < pause_until:
            app.processEvents()
        try:
            state["wait"] = next(plan)
        except StopIteration:
            app.exit(0)

    timer = QTimer()
    timer.timeout.connect(tick)
    timer.start(50)
    with servers:
        code = app.exec()
    window.close()
    window.shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "ci-artifacts"))
