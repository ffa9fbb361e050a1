"""GRADE as the paper defines it: contextual equivalence mirrors edges only inside the claim
cluster where it was judged (§3.1), and the difficulty matrix reports the bin-level Pearson r
of D_r with the error rate per hop row and along the diagonal (Tables 1 and 3)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from rag_complexity_agents.complexity.grade.difficulty import (
    DifficultyItem,
    DifficultyMatrix,
    difficulty_matrix,
)
from rag_complexity_agents.complexity.grade.equivalence import alias_pairs, apply_equivalences
from rag_complexity_agents.complexity.grade.kg import KnowledgeGraph, Triple
from rag_complexity_agents.complexity.grade.matrix import matrix_markdown
from rag_complexity_agents.complexity.grade.records import Claim, Sentence
from rag_complexity_agents.config import Config
from rag_complexity_agents.errors import InputError

# ---------------------------------------------------------------------------- mirroring


def _two_clusters() -> KnowledgeGraph:
    """Cluster A (claims a1, a2) is about the basketball player, cluster B (b1, b2) about the
    country: both use the name "Jordan"."""
    return KnowledgeGraph.from_triples(
        [
            Triple("Jordan", "played for", "Chicago Bulls", "a1"),
            Triple("Michael Jordan", "was born in", "Brooklyn", "a2"),
            Triple("Jordan", "borders", "Israel", "b1"),
            Triple("Amman", "is the capital of", "Jordan", "b2"),
        ]
    )


def test_context_equivalence_mirrors_only_the_clusters_edges() -> None:
    kg = _two_clusters()
    added = kg.apply_equivalence(["Jordan", "Michael Jordan"], "context", within={"a1", "a2"})
    assert added == 2
    # cluster A's edges are mirrored onto the other name ...
    assert kg.graph.edges["michael jordan", "chicago bulls"]["mirrored"] is True
    assert kg.graph.edges["jordan", "brooklyn"]["mirrored"] is True
    # ... the country's edges (cluster B) are not: "Michael Jordan borders Israel" and
    # "Amman is the capital of Michael Jordan" would be false multi-hop links
    assert not kg.graph.has_edge("michael jordan", "israel")
    assert not kg.graph.has_edge("amman", "michael jordan")
    assert all("michael jordan" not in p.nodes[1:] for p in kg.shortest_paths())


def test_mirror_copies_are_not_carried_into_another_cluster() -> None:
    kg = _two_clusters()
    kg.apply_equivalence(["Jordan", "Michael Jordan"], "context", within={"a1", "a2"})
    kg.graph.add_node("hashemite kingdom")
    kg.names["hashemite kingdom"] = "Hashemite Kingdom"
    # claim a2 also belongs (softly) to the country's cluster; its triple reached "jordan"
    # only as a mirror copy, so it does not travel on to the country's other name
    kg.mirror(["Jordan", "Hashemite Kingdom"], within={"a2", "b1", "b2"})
    assert kg.graph.has_edge("hashemite kingdom", "israel")
    assert kg.graph.has_edge("amman", "hashemite kingdom")
    assert not kg.graph.has_edge("hashemite kingdom", "brooklyn")
    assert not kg.graph.has_edge("hashemite kingdom", "chicago bulls")


def test_context_equivalence_needs_its_cluster() -> None:
    kg = _two_clusters()
    with pytest.raises(InputError, match="cluster"):
        kg.apply_equivalence(["Jordan", "Michael Jordan"], "context")
    # a merge is graph-wide and needs no cluster
    assert kg.apply_equivalence(["Jordan", "Michael Jordan"], "always") == 1


class _GroupingLLM:
    """Answers every equivalence prompt with the same group (the step LLM's interface)."""

    def __init__(self) -> None:
        self.skipped: Counter[str] = Counter()

    def generate(self, step: str, messages: Any, **_: Any) -> str:
        assert step == "equivalence"
        return "[Jordan | Michael Jordan] context"


class _FlatEmbedder:
    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return np.ones((len(texts), 4))


def _claim(claim_id: str, text: str) -> Claim:
    return Claim(claim_id, Sentence(claim_id, "d", "t", text, "c"), text)


def test_generation_applies_each_equivalence_inside_its_own_cluster() -> None:
    kg = _two_clusters()
    triples = [t for _, _, d in kg.graph.edges(data=True) for t in d["triples"]]
    player = [_claim("a1", "Jordan played for the Bulls."), _claim("a2", "M. J. was born...")]
    country = [_claim("b1", "Jordan borders Israel."), _claim("b2", "Amman is its capital.")]
    llm = _GroupingLLM()
    applied = apply_equivalences(
        llm,  # type: ignore[arg-type]
        kg,
        [player, country],
        triples,
        _FlatEmbedder(),  # type: ignore[arg-type]
        Config().grade,
    )
    assert applied == {"context": 1}  # the country's cluster has no "Michael Jordan"
    assert kg.graph.has_edge("michael jordan", "chicago bulls")
    assert not kg.graph.has_edge("michael jordan", "israel")
    assert not kg.graph.has_edge("amman", "michael jordan")


class _AliasLLM:
    """Says Yes to the alias question for the names of ``same`` (the step LLM's interface)."""

    def __init__(self, same: set[str]) -> None:
        self.same = same
        self.asked: list[tuple[str, str]] = []
        self.skipped: Counter[str] = Counter()

    def yes(self, step: str, messages: Any) -> float:
        assert step == "alias"
        lines = messages[-1][1].splitlines()
        first, second = (line.split(": ", 1)[1] for line in lines if line.startswith("Name "))
        self.asked.append((first, second))
        return 1.0 if {first, second} <= self.same else 0.0


def test_alias_pairs_are_one_name_written_two_ways() -> None:
    names = [
        *("Ann Arbor, Michigan", "Ann Arbor", "University of Michigan", "Michigan"),
        *("Green (album)", "Green", "Pepys", "Samuel Pepys", "Jakarta", "South Jakarta"),
        *("Peel", "Arthur Peel", "Jonathan Peel", "1998", "6 December 1998", "the award"),
    ]
    assert sorted(alias_pairs(names)) == [
        ("Ann Arbor", "Ann Arbor, Michigan"),
        ("Green", "Green (album)"),
        ("Pepys", "Samuel Pepys"),
    ]  # not a place inside a longer name, two Peels, a year in a date or a lower-case noun


def test_pairs_mode_merges_the_confirmed_pairs_into_a_missing_link() -> None:
    kg = KnowledgeGraph.from_triples(
        [
            Triple("Sam Raimi", "was born in", "Royal Oak, Michigan", "c1"),
            Triple("Royal Oak", "lies in", "Oakland County", "c2"),
            Triple("Raimi", "directed", "Evil Dead", "c3"),
        ]
    )
    triples = [t for _, _, d in kg.graph.edges(data=True) for t in d["triples"]]
    claims = [_claim(c, c) for c in ("c1", "c2", "c3")]
    llm = _AliasLLM({"Royal Oak", "Royal Oak, Michigan"})
    grade = Config().grade.model_copy(update={"equivalence": "pairs"})
    applied = apply_equivalences(llm, kg, [claims], triples, _FlatEmbedder(), grade)  # type: ignore[arg-type]
    assert applied == {"always": 1}
    assert sorted(llm.asked) == [("Raimi", "Sam Raimi"), ("Royal Oak", "Royal Oak, Michigan")]
    assert llm.skipped == Counter({"alias_rejected": 1})  # "Raimi": the LLM said No
    (path,) = [p for p in kg.shortest_paths(min_hops=2, max_hops=2)]
    assert [lk.via_equivalence for lk in path.links] == [False, True]
    assert kg.key("Raimi") != kg.key("Sam Raimi")


# ---------------------------------------------------------------------------- bin-level r


def _graded_items() -> list[DifficultyItem]:
    """Two hop levels × 8 questions over D_r 0.1..0.8; error rises with D_r (bin by bin) and
    with hops, but noisily per question."""
    items = []
    pattern = {2: [1, 1, 1, 0, 1, 0, 0, 0], 3: [1, 0, 1, 0, 0, 0, 0, 0]}
    for hops, correct in pattern.items():
        for i, ok in enumerate(correct):
            items.append(DifficultyItem(f"{hops}-{i}", hops, 0.1 * (i + 1), float(ok)))
    return items


def test_bin_level_r_per_hop_row_and_diagonal() -> None:
    m = difficulty_matrix(_graded_items(), n_bins=4)
    # hop 2: bins of (0.1, 0.2), (0.3, 0.4), (0.5, 0.6), (0.7, 0.8) → error 0, 0.5, 0.5, 1
    row = [m.cell(2, b) for b in range(4)]
    assert [c.error_rate for c in row] == [0.0, 0.5, 0.5, 1.0]
    assert [c.dr_mean for c in row] == pytest.approx([0.15, 0.35, 0.55, 0.75])
    assert m.r_bin_by_hop[2] == pytest.approx(
        np.corrcoef([0.15, 0.35, 0.55, 0.75], [0, 0.5, 0.5, 1])[0, 1]
    )
    r2, r3 = m.r_bin_by_hop[2], m.r_bin_by_hop[3]
    assert r2 is not None and r2 > 0.9 and r3 is not None and r3 > 0.7
    # the item-level r is the weaker, negative point-biserial one
    item_r2 = m.pearson_dr_accuracy_by_hop[2]
    assert item_r2 is not None and -r2 < item_r2 < 0
    # diagonal: (2, bin 0) → 0.0 and (3, bin 3) → 1.0, in order
    assert [(c.hops, c.dr_bin, c.error_rate) for c in m.diagonal] == [(2, 0, 0.0), (3, 3, 1.0)]
    assert m.r_bin_diagonal == pytest.approx(1.0)
    data = m.to_dict()
    assert data["r_bin_by_hop"] == {"2": m.r_bin_by_hop[2], "3": m.r_bin_by_hop[3]}
    assert data["r_bin_diagonal"] == m.r_bin_diagonal
    json.dumps(data)
    text = matrix_markdown(m)
    assert "bin level (GRADE)" in text and f"{m.r_bin_by_hop[2]:.3f}" in text


def test_bin_level_r_skips_empty_cells_and_is_undefined_below_two_points() -> None:
    items = [
        DifficultyItem("a", 2, 0.1, 1.0),
        DifficultyItem("b", 2, 0.2, 0.0),
        DifficultyItem("c", 2, 0.9, 0.0),
        DifficultyItem("d", 4, 0.95, 1.0),
    ]
    m = difficulty_matrix(items, n_bins=4, edges=[0.15, 0.5, 0.85])
    assert [m.cell(2, b).n for b in range(4)] == [1, 1, 0, 1]
    assert m.r_bin_by_hop[2] is not None and m.r_bin_by_hop[2] > 0  # 3 points, bin 3 empty
    assert m.r_bin_by_hop[4] is None  # one cell
    # diagonal (2, 0) → 0.0 and (4, 3) → 0.0: a constant error rate has no r
    assert [c.error_rate for c in m.diagonal] == [0.0, 0.0]
    assert m.r_bin_diagonal is None


def test_matrix_round_trips_through_its_dict() -> None:
    m = difficulty_matrix(_graded_items(), n_bins=4)
    data = m.to_dict()
    data["metric"] = "acc"
    old = {k: v for k, v in data.items() if not k.startswith("r_bin")}  # a pre-r_bin report
    again = DifficultyMatrix.from_dict(old)
    assert again.r_bin_by_hop == pytest.approx(m.r_bin_by_hop)
    assert again.r_bin_diagonal == pytest.approx(m.r_bin_diagonal)
    assert again.to_dict() == data
