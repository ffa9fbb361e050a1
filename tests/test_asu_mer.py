"""ASU (answer clustering, sign-safe rescoring, pair cache, garbage answers) and MER (prompt
assembly, answer extraction, evidence pooling), with fake equivalences and fake chat models."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agent_fakes import Script, ScriptedChat

from rag_complexity_agents.config import Config
from rag_complexity_agents.models.equivalence import LexicalEquivalence, NLIEquivalence, Verdict
from rag_complexity_agents.retrieval.asu import (
    AnswerSemanticUncertainty,
    EquivalenceCache,
    RescoreMode,
    build_asu_messages,
    cluster_answers,
    draw_samples,
    measure_uncertainty,
    rescore,
    sample_answer,
    semantic_entropy,
    with_rule,
)
from rag_complexity_agents.retrieval.mer import (
    DEFAULT_EXEMPLARS,
    FINAL_MARKER,
    MetaEvidenceReasoner,
    build_mer_messages,
    collect_evidence,
    extract_final_answer,
)
from rag_complexity_agents.retrieval.nar import NARParams
from rag_complexity_agents.retrieval.nar_trace import neighbourhood_aware_rerank
from rag_complexity_agents.types import Chunk, ScoredDoc

# ------------------------------------------------------------------------------------ fakes

# NLI verdicts premise -> hypothesis; pairs not listed are "neutral"
VERDICTS: dict[tuple[str, str], Verdict] = {
    ("The city of Paris", "Paris"): "entailment",
    ("Paris", "The city of Paris"): "entailment",
    ("Paris, France", "Paris"): "entailment",
    ("Paris", "Paris, France"): "neutral",  # Paris could be Paris, Texas
    ("Paris", "Lyon"): "contradiction",
    ("Lyon", "Paris"): "contradiction",
    ("Lyon", "Paris, France"): "contradiction",
    ("Paris, France", "Lyon"): "contradiction",
}


class TableNLI(NLIEquivalence):
    """The real NLI equivalence (and its strict/lenient rule) with a verdict table as model."""

    def __init__(self, directory: Path, rule: Any = "strict") -> None:
        super().__init__(directory, rule=rule)
        self.calls = 0

    def verdict(self, premise: str, hypothesis: str) -> Verdict:
        self.calls += 1
        strip = len("Q? ")
        return VERDICTS.get((premise[strip:], hypothesis[strip:]), "neutral")


class CountingEquivalence:
    name = "counting"

    def __init__(self) -> None:
        self.pairs: list[tuple[str, str, str | None]] = []

    def equivalent(self, a: str, b: str, *, question: str | None = None) -> bool:
        self.pairs.append((a, b, question))
        return a.lower()[:3] == b.lower()[:3]


ANSWERS = ["Paris", "paris.", "The city of Paris", "Lyon", "Paris, France"]


def doc(doc_id: str, score: float, text: str = "") -> ScoredDoc:
    return ScoredDoc(Chunk(doc_id, text or f"Passage {doc_id}.", title=doc_id.upper()), score)


# ------------------------------------------------------------------------------ clustering


def test_strict_and_lenient_clustering_on_a_hand_made_answer_set(tmp_path: Path) -> None:
    strict = EquivalenceCache(TableNLI(tmp_path, "strict"))
    lenient = EquivalenceCache(TableNLI(tmp_path, "lenient"))
    s_clusters = cluster_answers(ANSWERS, lambda a, b: strict.equivalent(a, b, question="Q?"))
    l_clusters = cluster_answers(ANSWERS, lambda a, b: lenient.equivalent(a, b, question="Q?"))
    # strict: both directions must entail -> "Paris, France" stays apart from "Paris"
    assert s_clusters == [[0, 1, 2], [3], [4]]
    # lenient: only a contradiction separates -> "Paris, France" joins "Paris"
    assert l_clusters == [[0, 1, 2, 4], [3]]
    assert semantic_entropy(s_clusters) == pytest.approx(
        -(0.6 * math.log(0.6) + 2 * 0.2 * math.log(0.2))
    )
    assert semantic_entropy([[0, 1, 2]]) == 0.0


def test_with_rule_copies_and_leaves_rule_less_equivalences_alone(tmp_path: Path) -> None:
    nli = TableNLI(tmp_path, "strict")
    lenient = with_rule(nli, "lenient")
    assert lenient is not nli and lenient.rule == "lenient" and nli.rule == "strict"
    assert with_rule(nli, "strict") is nli
    lexical = LexicalEquivalence()
    assert with_rule(lexical, "lenient") is lexical


def test_pair_cache_asks_each_unordered_pair_once_per_question() -> None:
    inner = CountingEquivalence()
    cache = EquivalenceCache(inner)
    answers = ["Tokyo", "tokyo city", "Kyoto", "Osaka"]
    first = measure_uncertainty(answers, cache, question="q1")
    asked = len(inner.pairs)
    again = measure_uncertainty(answers, cache, question="q1")
    assert len(inner.pairs) == asked  # every pair answered from the cache
    assert cache.hits > 0 and first.s == again.s == 3
    assert cache.equivalent("Kyoto", "Tokyo", question="q1") is False  # (b, a) hits (a, b)
    measure_uncertainty(answers, cache, question="q2")  # another question: asked again
    assert len(inner.pairs) == 2 * asked
    # identical normalised answers never reach the equivalence
    assert cache.equivalent("The Tokyo!", "tokyo", question="q3") and len(inner.pairs) == 2 * asked


def test_garbage_answers_give_s_equal_m_without_crashing() -> None:
    garbage = ["", "   ", "...", "\x00\x01\x02", "???", "—", "***"]
    asu = AnswerSemanticUncertainty(LexicalEquivalence(), sampler=lambda msgs, m: garbage[:m], m=7)
    batch = [doc("a", 0.5), doc("b", -0.5)]
    feedback = asu("Who?", batch, 0)
    assert feedback.info["s"] == 7 and asu.last is not None and asu.last.s == 7
    assert feedback.info["semantic_entropy"] == pytest.approx(math.log(7))
    assert np.allclose(feedback.scores, [-0.5 + 1.0 / 7, -0.5])
    # a backend that returns too few replies or non-strings: missing ones count as garbage
    short = AnswerSemanticUncertainty(
        LexicalEquivalence(), sampler=lambda msgs, m: ["Paris", None], m=4
    )
    assert short("Who?", batch, 0).info["s"] == 4
    assert json.dumps(feedback.info)


def test_extract_short_answer() -> None:
    assert sample_answer("Paris.") == "Paris"
    assert sample_answer("Answer: Hayao Miyazaki\nHe directed it.") == "Hayao Miyazaki"
    assert sample_answer('**Answer:**\n\n"1969"') == "1969"
    assert sample_answer("The answer is Mount Fuji. It is tall.") == "Mount Fuji"
    assert sample_answer("  \n---\n") == ""
    long = " ".join(f"w{i}" for i in range(40))
    assert len(sample_answer(long).split()) == 16


# ------------------------------------------------------------------------------ rescoring


def test_sign_safe_rescoring() -> None:
    scores = np.array([2.0, 0.5, 0.0, -0.5, -3.0])
    for mode in ("batch", "multiplicative"):
        assert np.array_equal(rescore(scores, 1, mode), scores)  # s = 1: unchanged
        for s in (2, 5):
            out = rescore(scores, s, mode)
            assert np.all(out <= scores)  # never raised, whatever the sign
            assert np.all(np.diff(out) < 0)  # order within the batch kept
            assert np.all(rescore(scores, s + 1, mode) <= out)  # more clusters, lower score
    # batch: 1/s on the min-max normalised scores (lo = -3), mapped back
    assert np.allclose(rescore(scores, 4, "batch"), [-1.75, -2.125, -2.25, -2.375, -3.0])
    assert np.allclose(rescore(scores, 4, "multiplicative"), [0.5, 0.125, 0.0, -2.0, -12.0])
    assert np.array_equal(rescore([0.7], 3), [0.7])  # one document: no scale, unchanged
    assert rescore([], 3).shape == (0,)
    # the paper's plain division would move a negative score up: the reason for all this
    assert -3.0 / 4 > -3.0
    with pytest.raises(ValueError):
        rescore(scores, 0)


def test_asu_penalty_is_scale_free() -> None:
    """The same batches and clusters give the same final order for cosines (0.3-0.8) as for
    the same scores on SPLADE's scale (x 40) or shifted (logits): the penalty does not depend
    on the scorer's unit. (``score - ln s`` put every s = 2 cosine below every s = 1 one,
    and changed nothing on the SPLADE scale.)"""
    batches = [([0.80, 0.62], 2), ([0.75, 0.70], 1), ([0.66, 0.35], 3)]

    def order(scale: float, shift: float) -> list[int]:
        final: list[float] = []
        for scores, s in batches:
            final.extend(rescore([scale * x + shift for x in scores], s).tolist())
        return sorted(range(len(final)), key=lambda i: -final[i])

    cosine = order(1.0, 0.0)
    assert order(40.0, 0.0) == cosine and order(3.0, -2.5) == cosine
    # the best document of an uncertain batch falls towards its batch's weakest one: below
    # the certain batch's best document, never below its own batch's weakest
    assert cosine == [2, 0, 3, 1, 4, 5]


def test_paper_rescore_is_the_papers_division_with_its_scale_dependence() -> None:
    """``paper``: each score divided by s, as the paper states; selectable by ``asu.rescore``.
    It depends on the scorer's zero and raises negative scores, unlike ``batch``."""
    scores = np.array([2.0, 0.5, 0.0, -0.5, -3.0])
    assert np.array_equal(rescore(scores, 1, "paper"), scores)  # s = 1: unchanged
    out = rescore(scores, 4, "paper")
    assert np.allclose(out, scores / 4)
    assert np.all(np.diff(out) < 0)  # order within the batch kept
    assert np.all(out[:2] < scores[:2]) and out[2] == 0.0  # positive scores fall
    assert np.all(out[3:] > scores[3:])  # negative scores (logits) rise
    # scale dependence: a shift of the scorer's scores reverses the order across batches
    batches = [([0.80, 0.62], 2), ([0.75, 0.70], 1)]

    def order(shift: float, mode: RescoreMode) -> list[int]:
        final: list[float] = []
        for batch_scores, s in batches:
            final.extend(rescore([x + shift for x in batch_scores], s, mode).tolist())
        return sorted(range(len(final)), key=lambda i: -final[i])

    assert order(0.0, "paper") == [2, 3, 0, 1]  # cosines: the uncertain batch falls
    assert order(-2.5, "paper") == [0, 1, 2, 3]  # as logits: the uncertain batch rises
    assert order(0.0, "batch") == order(-2.5, "batch") == [2, 0, 3, 1]
    with pytest.raises(ValueError, match="paper"):
        rescore(scores, 2, "log")  # type: ignore[arg-type]
    # selectable through the config field the ASU hook is built from
    assert Config().asu.rescore == "batch"
    assert Config().with_overrides({"asu.rescore": "paper"}).asu.rescore == "paper"
    asu = AnswerSemanticUncertainty(
        LexicalEquivalence(),
        sampler=lambda msgs, m: [f"a{i}" for i in range(m)],
        m=2,
        rescore_mode="paper",
    )
    feedback = asu("Who?", [doc("x", 0.8), doc("y", -0.4)], 0)
    assert feedback.info["s"] == 2 and feedback.info["rescore"] == "paper"
    assert np.allclose(feedback.scores, [0.4, -0.2])


def test_asu_as_a_nar_hook_penalises_uncertain_batches() -> None:
    def sampler(messages: Any, m: int) -> list[str]:
        body = messages[-1][1]
        # the batch with passage "good" gets consistent answers, others scatter
        if "good" in body:
            return ["Paris"] * m
        return [f"City {i}" for i in range(m)]

    asu = AnswerSemanticUncertainty(LexicalEquivalence(), sampler=sampler, m=4)
    initial = [
        doc("x", 0.9, "bad passage"),
        doc("w", 0.8, "bad passage"),
        doc("y", 0.85, "good passage"),
        doc("v", 0.7, "good passage"),
    ]
    raw = {"x": 0.9, "w": 0.6, "y": 0.8, "v": 0.5}
    result = neighbourhood_aware_rerank(
        "Where?",
        initial,
        score=lambda q, chunks: np.array([raw[c.id] for c in chunks]),
        neighbours=lambda i, n: [],
        chunk_of=lambda i: Chunk(i, i),
        params=NARParams(b=2, c=4),
        hook=asu,
    )
    # x had the highest score but its batch gave s = 4: 0.6 + 0.3 / 4 = 0.675 < 0.8
    assert [d.id for d in result.docs] == ["y", "x", "w", "v"]
    assert [b.hook["s"] for b in result.trace.batches] == [4, 1]
    assert json.dumps(result.trace.to_dict())


def test_draw_samples_and_the_asu_prompt() -> None:
    messages = build_asu_messages("Who?", [doc("a", 1.0, "x " * 500)], max_passage_chars=60)
    assert len(messages[-1][1]) < 200 and messages[-1][1].endswith("Question: Who?\nAnswer:")
    replies = ["Paris.", "Answer: Paris", "Lyon"]  # picked by the call's seed
    chat = ScriptedChat(reply=lambda prompt: replies[prompt.chat.seed % len(replies)])
    drawn = draw_samples(chat, messages, 3, temperature=0.3, seed=3, max_tokens=9)
    assert drawn == ["Paris.", "Answer: Paris", "Lyon"]  # seeds 3, 4, 5
    asu = AnswerSemanticUncertainty(LexicalEquivalence(), chat=chat, m=3)
    feedback = asu("Who?", [doc("a", 1.0)], 0)
    assert feedback.info["s"] == 2 and feedback.info["cluster_answers"] == ["Paris", "Lyon"]


# ------------------------------------------------------------------------------------- MER


def test_mer_prompt_assembly() -> None:
    path = [("Who directed Spirited Away?", "Hayao Miyazaki"), ("Where was he born?", "")]
    evidence = [doc("e1", 1.0, "Spirited Away is a film by Hayao Miyazaki."), "Loose text " * 200]
    messages = build_mer_messages("Where was the director born?", path, evidence)
    (role0, system), (role1, user) = messages
    assert (role0, role1) == ("system", "human")
    assert FINAL_MARKER in system
    # Fig. 4 order: exemplars, existing reasoning path, evidence, question (last)
    positions = [
        user.index(DEFAULT_EXEMPLARS[0].question),
        user.index("Now the real case"),
        user.index("1. Who directed Spirited Away? -> Hayao Miyazaki"),
        user.index("[1] E1: Spirited Away is a film"),
        user.index("Question: Where was the director born?"),
    ]
    assert positions == sorted(positions)
    assert user.rstrip().endswith("Question: Where was the director born?")
    assert "2. Where was he born? -> (no answer)" in user
    assert user.count(FINAL_MARKER) == len(DEFAULT_EXEMPLARS) + 1
    assert "[2] Loose text" in user and len(user.split("[2] Loose text")[1]) < 800  # clipped
    bare = build_mer_messages("Q?", [], [], exemplars=())[1][1]
    assert "Examples" not in bare and "(no sub-questions were asked)" in bare
    assert "(no evidence was retrieved)" in bare


@pytest.mark.parametrize(
    ("output", "answer", "method"),
    [
        ("[Reasoning]: E1 says so.\n[Final Answer]: Tokyo", "Tokyo", "marker"),
        ("Reasoning... **Final Answer:** *Mount Fuji*.", "Mount Fuji", "marker"),
        ("[Final Answer]:\n\n  Japan  \n", "Japan", "marker"),
        ("final answer - 1941", "1941", "marker"),
        ("[Final Answer]: Paris\n\nQuestion: another one\n[Final Answer]: Rome", "Paris", "marker"),
        ("[Final Answer]:\n[Final Answer]: Oslo", "Oslo", "marker"),
        ("Miyazaki was born in Tokyo. So the answer is Tokyo. Done.", "Tokyo", "answer_is"),
        ("[Reasoning]: blah\nAnswer: Kyoto", "Kyoto", "answer_line"),
        ("I think it's\nprobably Osaka.", "probably Osaka", "last_line"),
        ("[Reasoning]: only reasoning", "", "empty"),
        ("", "", "empty"),
        ("   \n\t", "", "empty"),
    ],
)
def test_final_answer_extraction(output: str, answer: str, method: str) -> None:
    extracted = extract_final_answer(output)
    assert (extracted.answer, extracted.method) == (answer, method)


def test_collect_evidence_rescores_the_pooled_top_l_against_the_question() -> None:
    first = [doc("a", 0.9), doc("b", 0.8), doc("c", 0.7)]
    second = [doc("b", 0.95), doc("d", 0.6), doc("e", 0.5)]
    table = {"a": 0.1, "b": 0.5, "c": 0.2, "d": 0.9, "e": 0.99}
    calls: list[list[str]] = []

    def score(question: str, chunks: Sequence[Chunk]) -> np.ndarray:
        calls.append([c.id for c in chunks])
        return np.array([table[c.id] for c in chunks])

    picked = collect_evidence("orig?", [first, second], l=2, score=score)
    assert calls == [["a", "b", "d"]]  # top-2 of each ranking, deduplicated
    assert [d.id for d in picked] == ["d", "b"] and [d.rank for d in picked] == [1, 2]
    assert picked[1].extra["sub_questions"] == [0, 1] and picked[1].extra["sub_score"] == 0.95
    unscored = collect_evidence("orig?", [first, second], l=3)
    assert [d.id for d in unscored] == ["a", "b", "d"]  # interleaved by rank


def test_meta_evidence_reasoner_with_a_format_breaking_model() -> None:
    chat = ScriptedChat(
        script=Script(default="The passages show he was born in Tokyo. So the answer is Tokyo.")
    )
    mer = MetaEvidenceReasoner(chat, max_tokens=64)
    result = mer("Where was he born?", [("Who?", "Miyazaki")], [doc("e1", 1.0)])
    assert (result.answer, result.method, result.evidence_ids) == ("Tokyo", "answer_is", ["e1"])
    assert chat.calls[0]["max_tokens"] == 64 and "\nQuestion:" in chat.calls[0]["stop"]
    assert json.dumps(result.to_trace())
