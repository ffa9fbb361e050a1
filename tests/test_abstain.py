"""Honest abstention: a final answer that is a few-shot exemplar's answer no retrieved passage
supports becomes 'unknown' (unit level and through a loop over the real demo collection)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_fakes import Script, ScriptedChat, demo_config, demo_home

from rag_complexity_agents.agents.abstain import exemplar_answers, unsupported_exemplar
from rag_complexity_agents.agents.answer import UNKNOWN_ANSWER, final_answer
from rag_complexity_agents.agents.context import derive_components
from rag_complexity_agents.agents.prompts import self_ask
from rag_complexity_agents.agents.registry import build_preset
from rag_complexity_agents.agents.run import run_graph
from rag_complexity_agents.components import Components
from rag_complexity_agents.retrieval.mer import DEFAULT_EXEMPLARS


def _retrieved(*texts: str) -> dict[str, Any]:
    docs = [{"id": f"d{i}", "title": "", "text": t} for i, t in enumerate(texts)]
    return {"retrievals": [{"step": 0, "docs": docs}]}


def test_exemplar_answers_cover_every_prompt_and_mer() -> None:
    answers = exemplar_answers()
    assert self_ask.exemplar_answers() <= answers
    assert {e.answer for e in DEFAULT_EXEMPLARS} <= answers
    assert "Mary Shelley" in answers  # an intermediate answer of a MER exemplar


def test_unsupported_exemplar_needs_retrieval_and_no_supporting_passage() -> None:
    unrelated = _retrieved("Hayao Miyazaki was born in Tokyo.")
    assert unsupported_exemplar("the Amstel", unrelated)
    assert unsupported_exemplar("William Godwin", unrelated)
    assert not unsupported_exemplar("Amstel", _retrieved("The Amstel flows through Amsterdam."))
    assert not unsupported_exemplar("Japan", unrelated)  # not an exemplar's answer
    assert not unsupported_exemplar("No", unrelated)  # yes/no is a kind of answer
    assert not unsupported_exemplar("Paris", {"retrievals": []})  # closed book
    # whole words only: "Peru" is not supported by "Perugia"
    assert unsupported_exemplar("Peru", _retrieved("Perugia is a city in Umbria."))


def test_final_answer_abstains_on_an_unsupported_exemplar_answer() -> None:
    state = {**_retrieved("Hayao Miyazaki was born in Tokyo."), "loop_answer": "Rembrandt"}
    answer, source = final_answer(state)
    assert answer == UNKNOWN_ANSWER and source.startswith("abstained")
    supported = {**_retrieved("Rembrandt painted The Night Watch."), "loop_answer": "Rembrandt"}
    assert final_answer(supported)[0] == "Rembrandt"


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> Components:
    home: Path = demo_home(tmp_path_factory.getbasetemp())
    return Components(demo_config(home))


def test_loop_never_returns_an_unsupported_exemplar_answer(parts: Components) -> None:
    """The sub-answer copies an exemplar (so the loop's own check, which trusts intermediate
    answers, accepts it); no passage about the question mentions it: the run abstains."""
    script = Script(
        self_ask=["Follow up: Who painted the ceiling?", "So the final answer is: Rembrandt"],
        answer="Rembrandt",
        asu="Rembrandt",
    )
    cfg = demo_config(parts.config.corpus.home)
    derived = derive_components(parts, cfg)
    derived.chat = ScriptedChat(script=script)  # type: ignore[misc]
    graph = build_preset("self_ask_sunar", cfg, components=derived)
    result = run_graph(graph, "哪位作家写了《红楼梦》？")
    json.dumps(result.trace)
    assert result.trace["loop_answer"] == "Rembrandt"
    assert result.answer == UNKNOWN_ANSWER
    assert result.trace["answer_source"].startswith("abstained")
