"""A chat template that thinks as Qwen3's does, shared by the reasoning tests of the engine and the window."""

from __future__ import annotations

QWEN3_STYLE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "<|im_start|>assistant\n{% if enable_thinking is defined and enable_thinking is false %}"
    "<think>\n\n</think>\n\n{% endif %}"
)
