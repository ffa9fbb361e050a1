"""Where a long passage is cut (``answer.passage_cut``): the pure cut, and the passages a real
single-step run over the demo collection shows its (scripted) reader."""

from __future__ import annotations

import pytest
from agent_fakes import Script, ScriptedChat, demo_config, demo_home

from rag_complexity_agents.agents.context import derive_components
from rag_complexity_agents.agents.registry import build_pipeline
from rag_complexity_agents.agents.run import run_graph
from rag_complexity_agents.components import Components
from rag_complexity_agents.text import CUT_MARK, cut_passage

PAGE = (
    "Ernst Mach was an Austrian physicist and philosopher. He was born in Brno. "
    + "He studied the flow of air around objects moving faster than sound. " * 8
    + "From 1867 he was employed at Charles University in Prague. He died in 1916."
)


def test_without_a_question_a_long_passage_is_cut_at_its_start() -> None:
    cut = cut_passage(PAGE, 200)
    assert cut == PAGE[:200] + CUT_MARK
    assert cut_passage(PAGE, 200, "Who was Ernst Mach's employer?", "Ernst Mach") != cut
    assert cut_passage("Short page.", 200, "Who?") == "Short page."


def test_the_sentences_that_hold_the_question_words_are_shown_marked_as_cut() -> None:
    cut = cut_passage(PAGE, 200, "Who was the employer of Ernst Mach?", "Ernst Mach")
    assert "Charles University" in cut and "Brno" not in cut
    assert cut.startswith(CUT_MARK.strip() + " ") and len(cut) <= 200
    middle = cut_passage(PAGE, 140, "In what year was Ernst Mach employed?", "Ernst Mach")
    assert middle.endswith(CUT_MARK) and "1867" in middle and len(middle) <= 140


def test_the_start_is_kept_when_nothing_later_holds_more_of_the_question() -> None:
    # the title's words do not count: every sentence of the page is about its subject
    assert cut_passage(PAGE, 200, "Who is Ernst Mach?", "Ernst Mach") == PAGE[:200] + CUT_MARK
    assert cut_passage(PAGE, 200, "Where was he born?", "Ernst Mach") == PAGE[:200] + CUT_MARK
    assert cut_passage(PAGE, 200, "Who painted the Mona Lisa?") == PAGE[:200] + CUT_MARK


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> Components:
    return Components(demo_config(demo_home(tmp_path_factory.getbasetemp())))


@pytest.mark.parametrize("where", ["start", "question"])
def test_a_run_reads_the_passage_cut_where_the_config_says(parts: Components, where: str) -> None:
    config = demo_config(
        parts.config.corpus.home, answer={"passage_chars": 120, "passage_cut": where}
    )
    derived = derive_components(parts, config)
    chat = ScriptedChat(script=Script(answer="an Italian word"))
    derived.chat = chat  # type: ignore[misc]
    graph = build_pipeline("single_step", config, components=derived)
    result = run_graph(graph, "Where does the name of Studio Ghibli come from?")
    prompt = next(c["human"] for c in chat.calls if c["kind"] == "answer")
    assert "Studio Ghibli" in prompt  # the page was retrieved and shown
    assert ("Its name comes from an Italian word" in prompt) == (where == "question")
    assert result.answer == "an Italian word"
