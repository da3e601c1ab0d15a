"""Speculative decoding's comparison tasks and one greedy answer to each (bench.speculative on the command
line, the benchmark lab in the window): an answer that copies a passage it was given, a code edit, free prose."""

from __future__ import annotations

from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.inference.events import Finished
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.inference.metrics import GenerationMetrics

PASSAGE = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, lit the great lamp, and wrote "
    "the weather, the ships he saw and the state of the sea in a leather-bound log. In winter the storms "
    "came from the north and the waves broke over the rocks below the tower; in summer the fishing boats "
    "passed close to the shore and their crews waved to him. He had kept the light for thirty years, and "
    "in all that time not one ship had been lost on the reef he watched over."
)
CODE = """def total_price(items, tax_rate):
    subtotal = 0.0
    for item in items:
        subtotal += item.price * item.quantity
    tax = subtotal * tax_rate
    return round(subtotal + tax, 2)


def cheapest(items):
    best = None
    for item in items:
        if best is None or item.price < best.price:
            best = item
    return best


def describe(items, tax_rate):
    lines = [f"{item.name}: {item.quantity} x {item.price:.2f}" for item in items]
    lines.append(f"total: {total_price(items, tax_rate):.2f}")
    return "\\n".join(lines)
"""
RENAMED = CODE.replace("total_price", "order_total")
TASKS = {
    # an answer that copies its input: where prompt lookup pays
    "copy": f"Text: {PASSAGE}\nThe same text, repeated word for word:\nText:",
    # a code edit: the file again with one name changed
    "code_edit": f"# before\n{CODE}\n# after: total_price renamed to order_total\n{RENAMED[:60]}",
    # free prose: little to copy, the drafts mostly rejected
    "free": "Once upon a time, in a small village by the sea, there lived an old fisherman who",
}


def one_run(rt: LocalRuntime, prompt: str, tokens: int, mode: str) -> tuple[str, GenerationMetrics]:
    rt.reset_cache()
    fin = None
    params = SamplingParams(temperature=0.0, max_tokens=tokens, ignore_eos=True, speculative=mode)
    for ev in rt.complete(prompt, params):
        if isinstance(ev, Finished):
            fin = ev
    assert fin is not None
    return fin.text, fin.metrics
