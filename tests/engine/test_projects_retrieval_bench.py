"""bench/retrieval_projects.py's figures come from a real run at a small size: every part of its JSON is
there, BM25 finds the generated facts (recall@5 >= 0.95), the fused figures say their model was
generated; and its generated questions paraphrase their passage rather than copy it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench import retrieval_projects as bench
from bench import retrieval_sets as sets
from tests.helpers.gguf_factory import write_word_bert

FAQ = """\
===================
Little Python FAQ
===================

.. contents::

General
=======

Why is the language called Python?
----------------------------------

The name comes from a television comedy that its author was reading scripts of at the time.

He wanted a name that was short, unique and slightly mysterious.

How do I read a file line by line?
----------------------------------

Open it and loop over the file object: each turn of the loop hands you the next line of text.

Can I delete it?
----------------

That depends on what other software on the machine relies on the interpreter being there.

Is it free?
-----------

He wanted a name that was short, unique and slightly mysterious.
"""


def write_faq(folder: Path) -> Path:
    folder.mkdir()
    (folder / "general.rst.txt").write_text(FAQ, encoding="utf-8")
    (folder / "index.rst.txt").write_text("FAQ\n===\n\n.. toctree::\n\n   general.rst\n", encoding="utf-8")
    return folder


def test_the_python_faq_is_read_without_its_question_titles_and_asks_them(tmp_path: Path) -> None:
    documents = sets.python_faq(write_faq(tmp_path / "faq"))
    assert documents is not None
    ((path, text),) = documents.files  # (the FAQ's table of contents is not one of its documents)
    assert path == "/python-faq/general.rst.txt"
    assert "?" not in text and "Little Python FAQ" in text and "General\n=======" in text
    assert "The name comes from a television comedy" in text
    # each question's answer is marked by its paragraphs' starts found once in the text: the one only
    # said twice ("Is it free?") asks nothing, the first question keeps its first paragraph's alone
    assert documents.questions == [
        ("Why is the language called Python?", ("the name comes from a television comedy ",)),
        ("How do I read a file line by line?", ("open it and loop over the file object: e",)),
        ("Can I delete it?", ("that depends on what other software on t",)),
    ]
    assert "3 of them" in documents.described and "4 question titles" in documents.described
    assert sets.python_faq(tmp_path / "nowhere") is None


def test_the_projects_retrieval_bench_reports_its_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    faq = ["--python-faq", str(write_faq(tmp_path / "faq"))]
    assert bench.main(["--facts", "60", "--distractors", "600", "--latency", "1500", *faq, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    generated = result["generated"]
    assert generated == {"passages": 660, "questions": 60, "recall_at_5": generated["recall_at_5"]}
    assert generated["recall_at_5"] >= 0.95
    real = result["real"]
    if real["document_set"] is None:
        assert real["recall_at_5"] is None and real["why"]
    else:
        assert "coreutils" in real["document_set"] and real["questions"] == len(sets.REAL_QUESTIONS)
        assert 0 <= real["recall_at_5"] <= 1 and real["passages"] > 100
    fused = result["fused"]
    assert fused["model"].startswith("GENERATED") and fused["passages"] == 660 and fused["embed_passages_per_s"] > 0
    for name in ("bm25", "fused"):
        assert 0 <= fused[f"{name}_recall_at_1"] <= fused[f"{name}_recall_at_5"] <= 1
        assert 0 < fused[f"{name}_mrr"] <= 1
    assert fused["bm25_recall_at_5"] == generated["recall_at_5"]  # (the same corpus and questions)
    (latency,) = result["latency"]
    assert latency["passages"] == 1500 and latency["index_passages_per_s"] > 0
    for name in ("bm25", "fused"):
        assert 0 < latency[f"{name}_p50_ms"] <= latency[f"{name}_p95_ms"] and latency[f"{name}_cpu_p95_ms"] > 0
    assert latency["vectors_first_load_s"] > 0
    faq_figures = result["real_python_faq"]
    assert faq_figures["questions"] == 3 and faq_figures["passages"] >= 1
    assert 0 <= faq_figures["recall_at_5_answer_start"] <= faq_figures["recall_at_5"] <= 1
    assert 0 < faq_figures["given_of_8"] <= 8
    budgets = result["budgets"]
    assert set(budgets) == {f"{k}.recall_at_5" for k in ("generated", "real", "real_python_faq")} | {
        "latency.bm25_p95_ms"
    }
    assert budgets["generated.recall_at_5"] == {"budget": ">= 0.95", "value": generated["recall_at_5"], "met": True}
    assert budgets["real_python_faq.recall_at_5"]["value"] == faq_figures["recall_at_5"]
    assert budgets["latency.bm25_p95_ms"]["met"] is None  # (no 100,000-passage run here)
    assert len(result["load_average"]) == 3
    assert result["within_budget"] is all(b["met"] is not False for b in budgets.values())


def test_a_generated_question_paraphrases_its_passage() -> None:
    passages, questions = bench.generated_corpus(60, 600)
    assert len(passages) == 660 and len(questions) == 60
    for question, answer in questions:
        passage = passages[answer]
        person = re.search(r"(?:did|had) (\w+)|(\w+)'s", question)
        assert person is not None
        name = next(g for g in person.groups() if g)
        assert name in passage and question.rstrip("?") not in passage
        assert sum(name in p for p in passages) >= 2  # (named elsewhere too, without the fact)
        verbs = set(re.findall(r"\w+", question.lower())) & set(bench.SYNONYMS)
        assert verbs and not any(re.search(rf"\b{v}\b", passage.lower()) for v in verbs)


def test_a_real_question_says_its_answer_in_other_words() -> None:
    stop = {"a", "an", "the", "of", "to", "in", "on", "at", "by", "for", "how", "do", "i", "can", "what", "which"}
    stop |= {"does", "is", "it", "with"}
    for question, phrase in sets.REAL_QUESTIONS:
        words = {w for w in re.findall(r"\w+", question.lower()) if w not in stop}
        for p in (phrase,) if isinstance(phrase, str) else phrase:
            shared = words & {w for w in re.findall(r"\w+", p.lower()) if w not in stop}
            assert len(shared) <= len(words) / 2, (question, shared)  # (at most half its words are the answer's)
    assert sets.answers(("no such words", "Print the KERNEL\n  name"), "It will print the kernel name.")
    assert not sets.answers("print the kernel name", "print the name of the kernel")


def test_a_given_embedding_model_is_measured_on_both_sets_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    passages, questions = bench.generated_corpus(20, 200)
    model = write_word_bert(tmp_path / "some-model.gguf", bench.word_meanings([*passages, *(q for q, _ in questions)]))
    assert (
        bench.main(["--facts", "20", "--distractors", "200", "--latency", "--embedding-model", str(model), "--json"])
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["fused"]["model"] == "some-model.gguf" and result["fused"]["passages"] == 220
    assert result["latency"] == []
    real = result["real"]
    if real["document_set"] is not None:
        assert real["fused"]["model"] == "some-model.gguf"
        assert real["fused"]["bm25"]["recall_at_5"] == real["recall_at_5"]
        assert 0 <= real["fused"]["fused"]["recall_at_1"] <= real["fused"]["fused"]["recall_at_5"] <= 1
