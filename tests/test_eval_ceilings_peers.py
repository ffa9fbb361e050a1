"""The end-to-end benchmark's machinery: paired bootstrap, the 2Wiki compositional subset, gold
sub-questions, the ceiling strategies (gold evidence, gold decomposition), the peers
(LlamaIndex SubQuestionQueryEngine, LangGraph create_react_agent) with fake chat models, and
what the runner and the report add per row (record strategies, load average, format failures,
breaks). No real model, no network."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agent_fakes import USAGE, Prompt, ScriptedChat, ToolChat, tool_call
from langchain_core.messages import AIMessage, ToolMessage

from rag_complexity_agents.components import Components
from rag_complexity_agents.config import Config
from rag_complexity_agents.errors import ConfigError, InputError, ModelServerError
from rag_complexity_agents.eval.base import RecordStrategy
from rag_complexity_agents.eval.ceilings import (
    GoldDecomposition,
    GoldEvidence,
    as_question,
    gold_passages,
    substitute_answers,
)
from rag_complexity_agents.eval.datasets import (
    DATASET_FILES,
    dataset_subset,
    default_data_dir,
    gold_decomposition,
    load_records,
    parse_record,
    resolve_dataset,
)
from rag_complexity_agents.eval.harness import evaluate, run_fingerprint
from rag_complexity_agents.eval.metrics import paired_difference
from rag_complexity_agents.eval.peers import ReactAgentPeer, SubQuestionPeer
from rag_complexity_agents.eval.report import paired_delta, summarize
from rag_complexity_agents.eval.runner import read_run, run_eval
from rag_complexity_agents.eval.strategies import get_strategy_spec
from rag_complexity_agents.types import Chunk, RunResult, ScoredDoc

DATA = default_data_dir()
needs_data = pytest.mark.skipif(
    not (DATA / DATASET_FILES["2wikimultihopqa"]).is_file(),
    reason=f"shared data not found in {DATA} (set RCA_DATA_DIR)",
)

# --------------------------------------------------------------------------------------------
# Paired bootstrap
# --------------------------------------------------------------------------------------------


def test_paired_difference_known_cases() -> None:
    same = paired_difference([1, 0, 1, 0], [1, 0, 1, 0])
    assert same is not None and (same.mean, same.lo, same.hi, same.n) == (0.0, 0.0, 0.0, 4)

    always = paired_difference([1.0] * 10, [0.0] * 10)
    assert always is not None and (always.mean, always.lo, always.hi) == (1.0, 1.0, 1.0)

    # 30 of 100 questions won, 10 lost: delta 0.2, and the paired interval excludes 0
    a = [1.0] * 30 + [0.0] * 10 + [1.0] * 20 + [0.0] * 40
    b = [0.0] * 30 + [1.0] * 10 + [1.0] * 20 + [0.0] * 40
    gain = paired_difference(a, b)
    assert gain is not None and gain.mean == pytest.approx(0.2) and gain.n == 100
    assert 0.0 < gain.lo < 0.2 < gain.hi < 0.4
    assert paired_difference(a, b) == gain  # fixed seed: reproducible
    loss = paired_difference(b, a)
    assert loss is not None and loss.mean == pytest.approx(-0.2) and loss.hi < 0.0

    assert paired_difference([], []) is None
    with pytest.raises(ValueError, match="equal lengths"):
        paired_difference([1.0], [1.0, 0.0])


def test_paired_delta_matches_questions_by_id() -> None:
    def line(qid: str, prediction: str) -> dict[str, Any]:
        return {"id": qid, "gold": ["Paris"], "prediction": prediction}

    loop = [line("a", "Paris"), line("b", "Paris"), line("c", "Rome"), line("x", "Paris")]
    base = [line("c", "Paris"), line("b", "Rome"), line("a", "Rome")]  # other order, no "x"
    delta = paired_delta(loop, base)
    assert delta is not None and delta.n == 3 and delta.mean == pytest.approx(1 / 3)
    assert paired_delta(loop, [line("z", "Paris")]) is None
    with pytest.raises(ValueError, match="unknown answer metric"):
        paired_delta(loop, base, metric="bleu")


# --------------------------------------------------------------------------------------------
# Datasets: compositional subset and gold sub-questions
# --------------------------------------------------------------------------------------------


def _wiki(qid: str, qtype: str, evidences: list[list[str]] | None = None) -> dict[str, Any]:
    return {
        "dataset": "2wikimultihopqa",
        "id": qid,
        "question": f"question {qid}?",
        "answer": "Homs",
        "type": qtype,
        "evidences": evidences or [],
        "paragraphs": [
            {"idx": 0, "title": "Marie Colvin", "text": "She died in Homs.", "is_supporting": True},
            {"idx": 1, "title": "Other", "text": "Unrelated.", "is_supporting": False},
            {
                "idx": 2,
                "title": "Juan Carlos Gumucio",
                "text": "Married Marie Colvin.",
                "is_supporting": True,
            },
        ],
    }


CHAIN = [
    ["Juan Carlos Gumucio", "spouse", "Marie Colvin"],
    ["Marie Colvin", "place of death", "Homs"],
]


def test_compositional_subset_selects_by_type_in_file_order() -> None:
    subset = dataset_subset("2wiki-compositional")
    assert subset is not None and subset is dataset_subset("2wikimultihopqa_compositional")
    assert "compositional" in subset.name and subset.dataset == "2wikimultihopqa"
    records = [
        parse_record(_wiki("1", "comparison")),
        parse_record(_wiki("2", "compositional", CHAIN)),
        parse_record(_wiki("3", "inference")),
        parse_record(_wiki("4", "compositional", CHAIN)),
    ]
    assert [r.id for r in subset.select(records)] == ["2", "4"]
    assert dataset_subset("musique") is None


@needs_data
def test_compositional_subset_of_the_real_file() -> None:
    subset = dataset_subset("2wikimultihopqa_compositional")
    assert subset is not None
    chosen = subset.select(load_records(resolve_dataset(subset.dataset, DATA)))
    assert len(chosen) == 202 and {r.qtype for r in chosen} == {"compositional"}
    assert all(gold_decomposition(r) for r in chosen)


def test_gold_decomposition_of_2wiki_evidence_chains() -> None:
    steps = gold_decomposition(parse_record(_wiki("2", "compositional", CHAIN)))
    assert steps is not None
    assert [s.question for s in steps] == ["Juan Carlos Gumucio >> spouse", "#1 >> place of death"]
    assert [s.answers for s in steps] == [("Marie Colvin",), ("Homs",)]
    # comparison / inference questions are not chains
    assert gold_decomposition(parse_record(_wiki("1", "comparison", CHAIN))) is None
    assert gold_decomposition(parse_record(_wiki("5", "compositional", CHAIN[:1]))) is None


def test_gold_decomposition_of_musique_is_its_own() -> None:
    record = parse_record(
        {
            "dataset": "musique",
            "id": "2hop_x",
            "question": "What is the seat of the county where Van Hook Township is?",
            "answer": "Stanley",
            "decomposition": [
                {"question": "Van Hook Township >> located in", "answer": "Mountrail County"},
                {"question": "#1 >> capital", "answer": "Stanley"},
            ],
        }
    )
    steps = gold_decomposition(record)
    assert steps is not None and [s.question for s in steps][1] == "#1 >> capital"


def test_substitute_answers_replaces_back_references() -> None:
    assert substitute_answers("#1 >> capital", ["Mountrail County"]) == (
        "Mountrail County >> capital"
    )
    assert (
        substitute_answers(
            "In the top five areas in #2 , where does #3 rank?",
            [
                "Papa Roach",
                "California",
                "San Diego",
            ],
        )
        == "In the top five areas in California , where does San Diego rank?"
    )
    assert substitute_answers("#12 and #2", ["a", "b"]) == "#12 and b"  # not "#1" + "2"
    assert substitute_answers("no reference", ["a"]) == "no reference"
    assert substitute_answers("#1 >> spouse", []) == "#1 >> spouse"


def test_as_question_rewrites_knowledge_base_steps_only() -> None:
    assert as_question("Mountrail County >> capital") == "What is the capital of Mountrail County?"
    assert (
        as_question("Jerzy Skolimowski >> educated at") == "Where was Jerzy Skolimowski educated?"
    )
    assert as_question("Van Hook Township >> located in the administrative territorial entity") == (
        "In which administrative territorial entity is Van Hook Township located?"
    )
    assert as_question(" who plays scarlett ") == "who plays scarlett"
    assert as_question(">> capital") == ">> capital"


# --------------------------------------------------------------------------------------------
# Ceilings, with a fake reader and a fake first stage
# --------------------------------------------------------------------------------------------


def reader(answer: Callable[[str], str]) -> ScriptedChat:
    """A fake reader: answers with ``answer(last message)``; every prompt is in ``calls``."""
    return ScriptedChat(reply=lambda prompt: answer(prompt.last))


class FakeFirstStage:
    """Returns one passage per query whose title is the query (and records the queries)."""

    name = "fake"

    def __init__(self) -> None:
        self.queries: list[str] = []

    def search(self, query: str, k: int) -> list[ScoredDoc]:
        self.queries.append(query)
        chunk = Chunk(id=f"c{len(self.queries)}", text=f"text about {query}", title=query)
        return [ScoredDoc(chunk, 1.0, rank=1)]


def _parts(chat: Any) -> Any:
    """Components over a fake first stage whose passages hold no answer: the exemplar check
    only, so the scripted answers are the runs' answers."""
    config = Config(agents={"abstain": "exemplar"})
    return Components(config, chat=chat, first_stage=FakeFirstStage())


def test_gold_evidence_reads_only_the_gold_paragraphs() -> None:
    record = parse_record(_wiki("2", "compositional", CHAIN))
    chat = reader(lambda human: "Homs" if "died in Homs" in human else "?")
    parts = _parts(chat)
    strategy = GoldEvidence(parts)
    assert isinstance(strategy, RecordStrategy)
    result = strategy.answer_record(record)
    assert result.answer == "Homs"
    prompt = chat.calls[0]["last"]
    assert "Marie Colvin" in prompt and "Juan Carlos Gumucio" in prompt
    assert "Unrelated" not in prompt
    trace = result.trace
    assert trace["strategy"] == "gold_evidence" and trace["retrieval_calls"] == 0
    assert [e["doc_id"] for e in trace["evidence"]] == list(record.supporting_ids)
    assert trace["llm_calls"] == 1 and trace["format_failures"] == 0
    assert parts.first_stage.queries == []
    # the pooled corpus's chunk shape: title line + text
    assert gold_passages(record)[0].text == "Marie Colvin\nShe died in Homs."
    with pytest.raises(InputError, match="evaluation harness"):
        strategy("question without a record?")


def test_gold_decomposition_feeds_each_answer_into_the_next_hop() -> None:
    record = parse_record(_wiki("2", "compositional", CHAIN))
    answers = {"spouse": "Marie Colvin", "place of death": "Homs"}

    def answer(human: str) -> str:
        question = human.rsplit("Question:", 1)[1]
        return next((a for key, a in answers.items() if key in question), "?")

    parts = _parts(reader(answer))
    result = GoldDecomposition(parts).answer_record(record)
    assert result.answer == "Homs"
    assert parts.first_stage.queries == [
        "What is the spouse of Juan Carlos Gumucio?",
        "What is the place of death of Marie Colvin?",
    ]
    trace = result.trace
    assert [hop["covered"] for hop in trace["hops"]] == [True, True]
    assert trace["llm_calls"] == 2 and trace["retrieval_calls"] == 2
    assert trace["input_tokens"] == 2 * USAGE["input_tokens"] and len(trace["evidence"]) == 2

    with pytest.raises(InputError, match="no gold decomposition"):
        GoldDecomposition(parts).answer_record(parse_record(_wiki("1", "comparison")))


def test_gold_bridges_carry_the_gold_answer_not_the_readers() -> None:
    record = parse_record(_wiki("2", "compositional", CHAIN))

    def answer(human: str) -> str:  # wrong on the bridge hop, right on the last one
        return "Homs" if "place of death" in human.rsplit("Question:", 1)[1] else "Nobody"

    predicted = _parts(reader(answer))
    GoldDecomposition(predicted).answer_record(record)
    assert predicted.first_stage.queries[1] == "What is the place of death of Nobody?"

    parts = _parts(reader(answer))
    result = GoldDecomposition(parts, bridges="gold").answer_record(record)
    assert parts.first_stage.queries == [
        "What is the spouse of Juan Carlos Gumucio?",
        "What is the place of death of Marie Colvin?",
    ]
    trace = result.trace
    assert result.answer == "Homs" and trace["strategy"] == "gold_bridges"
    # the reader's own answers stay in the trace: the bridge hop is not counted as covered
    assert [(hop["answer"], hop["covered"]) for hop in trace["hops"]] == [
        ("Nobody", False),
        ("Homs", True),
    ]


def test_ceilings_are_registered() -> None:
    for name in (
        "gold_evidence",
        "gold_decomposition",
        "gold_bridges",
        "llamaindex_subquestion",
        "langgraph_react_agent",
    ):
        assert get_strategy_spec(name).name == name


# --------------------------------------------------------------------------------------------
# Runner and report
# --------------------------------------------------------------------------------------------


class EchoGold(RecordStrategy):
    """Answers with the gold answer and reports one format failure."""

    def answer_record(self, record: Any) -> RunResult:
        return RunResult(
            answer=record.answer,
            trace={"llm_calls": 1, "retrieval_calls": 0, "format_failures": 1, "evidence": []},
        )


def test_runner_hands_record_strategies_the_record(tmp_path: Path) -> None:
    records = [parse_record(_wiki(str(i), "compositional", CHAIN)) for i in range(3)]
    out = tmp_path / "run.jsonl"
    run_eval(records, EchoGold(), out, strategy_name="echo", progress=False)
    lines = read_run(out)
    assert [line["metrics"]["cover_em"] for line in lines] == [1.0, 1.0, 1.0]
    assert all(isinstance(line["load_average"], float) for line in lines)
    row = summarize(lines)
    assert row.format_failures == 3 and row.breaks == 0 and row.load_average is not None
    assert row.to_dict()["format_failures"] == 3


def test_report_counts_breaks_and_treats_missing_counts_as_zero() -> None:
    lines = [
        {"id": "a", "gold": ["x"], "prediction": "", "trace": {"peer_break": {"type": "E"}}},
        {"id": "b", "gold": ["x"], "prediction": "x", "trace": {}},
    ]
    row = summarize(lines)
    assert (row.breaks, row.format_failures, row.load_average) == (1, 0, None)


def test_subset_runs_get_their_own_fingerprint_and_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "echo_gold.py").write_text(ECHO_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    data = tmp_path / "data"
    data.mkdir()
    rows = [
        _wiki("1", "comparison"),
        _wiki("2", "compositional", CHAIN),
        _wiki("3", "compositional", CHAIN),
    ]
    (data / DATASET_FILES["2wikimultihopqa"]).write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )
    config = Config(corpus={"home": tmp_path / "home"}, eval={"data_dir": data})
    builder = "echo_gold:build"
    outcome = evaluate(config, builder, "2wikimultihopqa_compositional", progress=False)
    assert outcome.summary.out.name.startswith("2wikimultihopqa_compositional__")
    assert [line["id"] for line in read_run(outcome.summary.out)] == ["2", "3"]
    assert outcome.fingerprint != run_fingerprint(config, builder, data / "x.jsonl")


ECHO_MODULE = """
from rag_complexity_agents.eval.base import RecordStrategy
from rag_complexity_agents.types import RunResult


class Echo(RecordStrategy):
    def answer_record(self, record):
        return RunResult(answer=record.answer, trace={"llm_calls": 0, "evidence": []})


def build(parts):
    return Echo()
"""


# --------------------------------------------------------------------------------------------
# Peers, with fake chat models
# --------------------------------------------------------------------------------------------


def _react_script(prompt: Prompt) -> AIMessage:
    assert prompt.tools == ["search"]
    results = [m for m in prompt.messages if isinstance(m, ToolMessage)]
    if len(results) == 0:
        return tool_call("search", {"query": "Juan Carlos Gumucio spouse"}, "1")
    if len(results) == 1:
        return tool_call("search", {"query": "Marie Colvin place of death"}, "2")
    return AIMessage(content="Answer: Homs.")


def test_react_agent_peer_searches_through_our_first_stage() -> None:
    chat = ToolChat(tool_reply=_react_script)
    parts = _parts(chat)
    result = ReactAgentPeer(parts)("Where did Juan Carlos Gumucio's wife die?")
    assert result.answer == "Homs"
    trace = result.trace
    assert "peer_break" not in trace
    assert trace["queries"] == ["Juan Carlos Gumucio spouse", "Marie Colvin place of death"]
    assert parts.first_stage.queries == trace["queries"]
    assert [e["title"] for e in trace["evidence"]] == trace["queries"]
    assert trace["llm_calls"] == 3 and trace["retrieval_calls"] == 2
    assert trace["input_tokens"] == 3 * USAGE["input_tokens"] and trace["format_failures"] == 0
    assert chat.calls[0]["types"][0] == "system"  # the peer's own system prompt
    assert not chat.callbacks  # the counter went on a copy


def test_react_agent_peer_records_a_break_as_a_wrong_answer() -> None:
    def loop_forever(prompt: Prompt) -> AIMessage:
        return tool_call("search", {"query": "again"}, str(len(prompt.messages)))

    result = ReactAgentPeer(_parts(ToolChat(tool_reply=loop_forever)))("q?")
    assert result.answer == ""
    assert result.trace["peer_break"]["type"] == "GraphRecursionError"
    assert result.trace["retrieval_calls"] == Config().agents.max_steps


def test_react_agent_peer_refuses_a_model_without_tool_calling() -> None:
    with pytest.raises(ConfigError, match="bind_tools"):
        ReactAgentPeer(_parts(reader(lambda human: "x")))


def test_peers_let_backend_failures_stop_the_run() -> None:
    with pytest.raises(ModelServerError):
        ReactAgentPeer(_parts(ToolChat(fail_with=ModelServerError("server down"))))("q?")


def _subquestion_reader(human: str) -> str:
    if "sub_question" in human:  # LlamaIndex's question-generation prompt
        return json.dumps(
            [
                {"sub_question": "Who was Juan Carlos Gumucio's wife?", "tool_name": "wikipedia"},
                {"sub_question": "Where did Marie Colvin die?", "tool_name": "wikipedia"},
            ]
        )
    return "Homs" if "Marie Colvin" in human else "Marie Colvin"


def test_subquestion_peer_runs_llamaindex_over_our_first_stage() -> None:
    pytest.importorskip("llama_index.core")
    parts = _parts(reader(_subquestion_reader))
    result = SubQuestionPeer(parts)("Where did Juan Carlos Gumucio's wife die?")
    trace = result.trace
    assert "peer_break" not in trace, trace.get("peer_break")
    assert trace["queries"] == [
        "Who was Juan Carlos Gumucio's wife?",
        "Where did Marie Colvin die?",
    ]
    assert result.answer == "Homs"
    # question generation + one synthesis per sub-question + the final synthesis
    assert trace["llm_calls"] == 4 and trace["retrieval_calls"] == 2
    assert [e["title"] for e in trace["evidence"]] == trace["queries"]


def test_subquestion_peer_break_on_bad_json() -> None:
    pytest.importorskip("llama_index.core")
    chat = reader(lambda human: "I think we should search." if "sub_question" in human else "?")
    result = SubQuestionPeer(_parts(chat))("q?")
    assert result.answer == "" and result.trace["peer_break"]["type"]
    assert result.trace["llm_calls"] == 1
