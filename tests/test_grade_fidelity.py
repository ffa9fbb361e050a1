"""GRADE as the paper defines it: contextual equivalence mirrors edges only inside the claim
cluster where it was judged (§3.1), and the difficulty matrix reports the bin-level Pearson r
of D_r with the error rate per hop row and along the diagonal (Tables 1 and 3)."""

from __future__ import annotations

import pytest

from rag_complexity_agents.complexity.grade.kg import KnowledgeGraph, Triple
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
