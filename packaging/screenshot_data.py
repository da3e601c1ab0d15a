"""What packaging/screenshots.py writes into its temporary data folder for the chat list, math,
presets, backups and comparison screenshots (texts written by this script, to show the window: no
model wrote them)."""

from __future__ import annotations

from pathlib import Path

from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.presets import PresetLibrary

MATH_QUESTION = "How do I solve a quadratic equation?"
MATH_ANSWER = r"""A quadratic equation has the form $ax^2 + bx + c = 0$ with $a \neq 0$. Its solutions are

$$x = \frac{-b \pm \sqrt{b^2 - 4ac}}{2a}$$

The discriminant $\Delta = b^2 - 4ac$ tells you how many real solutions there are:

- $\Delta > 0$: two, $\Delta = 0$: one, $\Delta < 0$: none (two complex ones).

For example $x^2 - 5x + 6 = 0$ gives $x = \frac{5 \pm 1}{2}$, so $x = 2$ or $x = 3$. A calculator that
costs $5 does the same, but the sum of the roots is always

\[ x_1 + x_2 = -\frac{b}{a}, \qquad x_1 x_2 = \frac{c}{a}. \]"""

COMPARE_QUESTION = "Say hello to Ember."

# 30 chats: 3 folders (one with a subfolder), 2 pinned, the rest loose; 2 more in the Trash
FOLDERS: dict[str, list[str]] = {
    "Work": [
        "Quarterly report outline",
        "Email to the design team",
        "Meeting notes, 3 March",
        "SQL query for churn",
        "Slides: roadmap 2027",
        "Hiring plan questions",
        "Rewrite the onboarding doc",
    ],
    "Recipes": [
        "Sourdough starter schedule",
        "Vegetarian lasagne",
        "Thai green curry",
        "Meal prep for a week",
        "Lemon tart",
    ],
    "Travel": [
        "Lisbon in four days",
        "Packing list: hiking",
        "Train from Paris to Milan",
        "Japan rail pass worth it?",
    ],
}
SUBFOLDER = ("Work", "Clients", ["Proposal for Acme", "Invoice reminder wording"])
PINNED = ["Python cheat sheet", "My writing style guide"]
LOOSE = [
    "Explain a Fourier transform",
    "Birthday gift ideas",
    "Fix a flaky pytest",
    "Regex for dates",
    "Summarise this article",
    "Spanish verbs: ser vs estar",
    "Plant care: monstera",
    "Bash loop over files",
    "Compare two laptops",
    "Haiku about autumn",
]
TRASHED = ["Test chat", "Untitled draft"]
COLLAPSED = "Recipes"


def chat_list(store: ConversationStore) -> int:
    """The folders, pins and Trash of the chat list; returns how many chats are listed (not trashed)."""
    o = store.organise
    listed = 0

    def chat(title: str) -> int:
        c = store.create_conversation(title)
        store.add_message(c.id, "user", title)
        return c.id

    folder_ids = {}
    for name, titles in FOLDERS.items():
        folder = o.create_folder(name)
        folder_ids[name] = folder.id
        o.move_chats([chat(t) for t in titles], folder.id)
        listed += len(titles)
    parent, name, titles = SUBFOLDER
    sub = o.create_folder(name, folder_ids[parent])
    o.move_chats([chat(t) for t in titles], sub.id)
    listed += len(titles)
    for title in LOOSE:
        chat(title)
    o.set_pinned([chat(t) for t in PINNED], True)
    listed += len(LOOSE) + len(PINNED)
    o.trash_chats([chat(t) for t in TRASHED])
    o.set_collapsed(folder_ids[COLLAPSED], True)
    return listed


def math_chat(store: ConversationStore) -> int:
    chat = store.create_conversation("Quadratic equations")
    q = store.add_message(chat.id, "user", MATH_QUESTION)
    store.add_message(chat.id, "assistant", MATH_ANSWER, parent_id=q.id)
    return chat.id


def presets(library: PresetLibrary) -> str:
    """Three presets; the first one's id."""
    first = library.create_from(
        "Code reviewer",
        "You review Python code: point out bugs first, then style. Be brief.",
        {"temperature": 0.2, "max_tokens": 2048},
    )
    library.create_from(
        "Creative writer",
        "You write vivid, short fiction in plain English.",
        {"temperature": 1.1, "top_p": 0.95, "max_tokens": 1500},
    )
    library.create_from(
        "Translator (French)",
        "Translate everything the user writes into natural French. Output only the translation.",
        {"temperature": 0.0, "max_tokens": 1024},
    )
    return first.id


def tiny_models(folder: Path) -> tuple[str, str]:
    """Two tiny models (the tests' GGUF writer, two seeds, each saying its own words whatever it is
    asked: greedy, so the answers are always the same), their file names."""
    from tests.helpers.gguf_factory import TinySpec, says, write_tiny_model

    same = says("▁hello", "▁world", "▁and", "▁you", ".")
    write_tiny_model(folder / "tiny-hello.gguf", TinySpec(script=same, name="Tiny Hello", seed=1))
    other = says("▁hello", ",", "▁Ember", "!", "▁it", "▁is", "▁you", "?")
    write_tiny_model(folder / "tiny-ember.gguf", TinySpec(script=other, name="Tiny Ember", seed=2))
    return "tiny-hello.gguf", "tiny-ember.gguf"


def project(store: ConversationStore, folder: Path) -> int:
    """A project "Thesis" (its icon, instructions, two chats) whose knowledge is a folder of six
    documents and one binary file under a text name (skipped, with its reason); its folder's id."""
    from ember_chat.engine.projects.records import ProjectStore

    (folder / "chapters").mkdir(parents=True)
    for n in range(1, 6):
        text = f"# Chapter {n}\n\n" + "River sediment transport and floodplain ecology. " * 300
        (folder / "chapters" / f"chapter-{n}.md").write_text(text, encoding="utf-8")
    (folder / "field-notes.txt").write_text("Tagus survey, May: three sampling sites.\n" * 50, encoding="utf-8")
    (folder / "scan.txt").write_bytes(bytes(range(256)) * 100)
    projects = ProjectStore(store)
    thesis = projects.create(
        "Thesis", icon="📚", instructions="You are my thesis supervisor. Answer in British English; cite the chapter."
    )
    for title in ("Outline of chapter 3", "Sediment sampling methods"):
        chat = store.create_conversation(title)
        store.add_message(chat.id, "user", title)
        store.organise.move_chats([chat.id], thesis.folder_id)
    projects.add_source(thesis.folder_id, folder)
    return thesis.folder_id
