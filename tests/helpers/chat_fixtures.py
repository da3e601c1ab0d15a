"""Conversations written straight into a store: a long chat for the transcript's laziness tests and the
GUI benchmark, and a Markdown-rich answer for the rendering tests."""

from __future__ import annotations

from ember_chat.engine.storage.conversations import ConversationStore

RICH_ANSWER = """Here is a *short* answer with `inline code` and a [link](https://example.org/docs).

```python
def add(a: int, b: int) -> int:
    return a + b  # a comment
```

| col | value |
|---|---|
| one | 1 |

> a quoted line

```
plain text block
```"""


def seed_long_chat(store: ConversationStore, n_messages: int = 500, title: str = "A long chat") -> int:
    """A conversation of `n_messages` alternating questions and Markdown answers (some with code)."""
    conv = store.create_conversation(title)
    parent = None
    for i in range(n_messages):
        if i % 2 == 0:
            text = f"Question {i // 2}: how does step {i // 2} work, and why?"
            role = "user"
        else:
            role = "assistant"
            text = (
                f"Answer {i // 2}. **Step {i // 2}** works like this:\n\n"
                + "- first, the input is read\n- then it is *transformed*\n- finally `result` is written\n\n"
                + ("```python\nfor x in range(10):\n    print(x * x)\n```\n\n" if i % 6 == 1 else "")
                + "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 6
            )
        m = store.add_message(conv.id, role, text, parent_id=parent)
        parent = m.id
    return conv.id
