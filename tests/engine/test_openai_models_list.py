"""openai/models_list.py: the `GET /models` answer Ember's server writes is one its remote backend reads."""

from __future__ import annotations

from ember_chat.engine.openai.models_list import RemoteModelInfo, model_infos, models_answer


def test_embers_models_answer_reads_back_with_its_context_length() -> None:
    assert model_infos(models_answer("qwen-0.5b", 4096)) == [RemoteModelInfo("qwen-0.5b", 4096, "ember")]


def test_no_model_loaded_lists_none() -> None:
    assert models_answer(None) == {"object": "list", "data": []}
    assert model_infos(models_answer(None)) == []
