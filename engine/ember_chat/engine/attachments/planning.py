"""How a turn's attachments reach the prompt, decided on the engine thread where the tokenizer is:
whole when everything fits the budget (context minus the answer's tokens minus the conversation);
otherwise the smaller files whole while they fit and, for the rest, the passages that best match the
question (FTS5 bm25) within what is left, said out loud: "38 of 412 passages used". Never a silent cut.
Each file's text goes in a delimited block that names it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from ember_chat.engine.attachments.turn_plan import RETRIEVAL, WHOLE, PlannedAttachment, Source, TurnPlan
from ember_chat.engine.core.messages import AttachmentRef, ChatMessage

if TYPE_CHECKING:
    from ember_chat.engine.attachments.store import AttachmentStore, ChunkHit, StoredAttachment

SEARCH_LIMIT = 400  # passages considered per turn (the best by bm25)


def whole_block(att: StoredAttachment, text: str) -> str:
    pages = f", {att.pages} pages" if att.pages else ""
    return f"<<<file: {att.name} ({att.kind}{pages}, whole)>>>\n{text}\n<<<end of file: {att.name}>>>"


def _passage_text(hit: ChunkHit) -> str:
    where = f", page {hit.page}" if hit.page is not None else ""
    return f"[passage {hit.seq + 1}{where}]\n{hit.text}\n"


def _retrieval_head(att: StoredAttachment, used: int, total: int, matched: bool = True) -> str:
    which = "the ones that best match the question" if matched else "its first ones (none has the question's words)"
    return (
        f"<<<file: {att.name} ({att.kind}) is too long to read whole: {used:,} of {total:,} passages, "
        f"{which}, in document order>>>"
    )


def plan_turn(
    refs: Iterable[AttachmentRef],
    question: str,
    budget_tokens: int,
    count_tokens: Callable[[str], int],
    store: AttachmentStore,
) -> TurnPlan:
    """Plan the text attachments `refs` (images are not planned here) for a question within a budget."""
    atts: dict[int, StoredAttachment] = {}
    for ref in refs:
        if ref.attachment_id not in atts and ref.kind != "image":
            atts[ref.attachment_id] = store.get(ref.attachment_id)
    blocks: dict[int, str] = {}
    items: dict[int, PlannedAttachment] = {}
    sources: list[Source] = []
    whole: dict[int, tuple[str, int]] = {}
    for att in atts.values():
        block = whole_block(att, store.text(att))
        whole[att.id] = (block, count_tokens(block))
    remaining = budget_tokens
    rest: list[StoredAttachment] = []
    for att in sorted(atts.values(), key=lambda a: whole[a.id][1]):  # the smaller files whole first
        block, tokens = whole[att.id]
        if tokens <= remaining:
            remaining -= tokens
            blocks[att.id] = block
            total = store.chunk_count(att.id)
            items[att.id] = PlannedAttachment(att.name, att.kind, tokens, WHOLE, total, total, att.id, tokens)
        else:
            rest.append(att)
    if rest:
        whole_tokens = {att.id: whole[att.id][1] for att in rest}
        _retrieve(rest, question, remaining, count_tokens, store, blocks, items, sources, whole_tokens)
    order = list(atts)
    return TurnPlan(
        [items[i] for i in order],
        sources,
        "\n\n".join(blocks[i] for i in order),
        {i: blocks[i] for i in order},
    )


def _retrieve(
    atts: list[StoredAttachment],
    question: str,
    budget: int,
    count_tokens: Callable[[str], int],
    store: AttachmentStore,
    blocks: dict[int, str],
    items: dict[int, PlannedAttachment],
    sources: list[Source],
    whole_tokens: dict[int, int],
) -> None:
    totals = {att.id: store.chunk_count(att.id) for att in atts}
    ends = {att.id: f"<<<end of file: {att.name}>>>" for att in atts}
    overhead = {
        att.id: count_tokens(_retrieval_head(att, totals[att.id], totals[att.id]) + "\n" + ends[att.id]) for att in atts
    }
    remaining = budget - sum(overhead.values())
    hits = store.search(list(totals), question, SEARCH_LIMIT)
    matched = bool(hits)
    if not matched:  # no word of the question is in the files: their beginnings, said as such
        per_file = max(1, SEARCH_LIMIT // len(atts))
        hits = [hit for att in atts for hit in store.chunks(att.id, 0, per_file)]
    chosen: dict[int, list[tuple[ChunkHit, int]]] = {att.id: [] for att in atts}
    for hit in hits:
        text = _passage_text(hit)
        tokens = count_tokens(text)
        if tokens <= remaining:
            remaining -= tokens
            chosen[hit.attachment_id].append((hit, tokens))
    if matched:  # room left: the passages around the ones found, best first (a fact's context)
        remaining = _add_neighbours(chosen, remaining, count_tokens, store)
    for att in atts:
        picked = sorted(chosen[att.id], key=lambda pair: pair[0].seq)
        used = len(picked)
        head = _retrieval_head(att, used, totals[att.id], matched)
        body = "".join(_passage_text(hit) for hit, _ in picked) or "(no room for any passage this turn)\n"
        blocks[att.id] = f"{head}\n{body}{ends[att.id]}"
        tokens = overhead[att.id] + sum(t for _, t in picked)
        items[att.id] = PlannedAttachment(
            att.name, att.kind, tokens, RETRIEVAL, used, totals[att.id], att.id, whole_tokens[att.id]
        )
        sources.extend(Source(att.id, att.name, hit.page, hit.seq, hit.text) for hit, _ in picked)


def _add_neighbours(
    chosen: dict[int, list[tuple[ChunkHit, int]]],
    remaining: int,
    count_tokens: Callable[[str], int],
    store: AttachmentStore,
) -> int:
    found = sorted((hit for pairs in chosen.values() for hit, _ in pairs), key=lambda hit: hit.rank)
    have = {(hit.attachment_id, hit.seq) for hit in found}
    for hit in found:
        for near in store.chunks(hit.attachment_id, max(0, hit.seq - 1), 3):
            if (near.attachment_id, near.seq) in have:
                continue
            tokens = count_tokens(_passage_text(near))
            if tokens <= remaining:
                remaining -= tokens
                have.add((near.attachment_id, near.seq))
                chosen[near.attachment_id].append((near, tokens))
    return remaining


def conversation_refs(messages: list[ChatMessage]) -> list[AttachmentRef]:
    """Every text attachment of the conversation, in the order they were attached."""
    seen: dict[int, AttachmentRef] = {}
    for m in messages:
        for ref in m.attachments:
            if ref.kind != "image":
                seen.setdefault(ref.attachment_id, ref)
    return list(seen.values())


def apply_plan(messages: list[ChatMessage], plan: TurnPlan) -> list[ChatMessage]:
    """The messages with each attachment's block put before the text of the message that attached it
    (first time only), so a file read whole keeps the same place turn after turn (the KV cache reuses it)."""
    placed: set[int] = set()
    out: list[ChatMessage] = []
    for m in messages:
        mine = [r.attachment_id for r in m.attachments if r.attachment_id in plan.blocks]
        mine = [i for i in dict.fromkeys(mine) if i not in placed]
        placed.update(mine)
        if mine:
            text = "\n\n".join([*(plan.blocks[i] for i in mine), m.content])
            m = replace(m, content=text)
        out.append(m)
    return out
