"""The GRADE knowledge graph: triples → directed graph, entity equivalence, multi-hop paths.

Deterministic (no models). Nodes are entities keyed by a normalised name (exact-match merge:
case, articles, punctuation and spacing are ignored); each directed edge keeps the triples
that produced it. Entity equivalence found by the LLM inside a claim cluster changes the graph
in one of two ways (GRADE §3.1):

* ``always`` equivalent entities are **merged** into one canonical node (the member with the
  most edges, ties broken by the shorter, then alphabetically first name); the other names
  become its aliases;
* ``context`` equivalent entities (the same thing only in this cluster's claims) keep their
  nodes, and each member's in- and out-edges *that come from the cluster's claims* are
  **mirrored** onto the other members (marked ``mirrored``), so a path can continue through the
  equivalent entity there, and only there: an edge extracted from a claim outside the cluster
  (where the two names may mean different things) is never copied.

Paths are the shortest directed paths (hence acyclic) between every ordered pair of nodes, of
2–5 edges by default, one per (start, end) pair, never starting and ending at the same node;
:func:`sample_paths` draws a fixed number per hop count.
"""

from __future__ import annotations

import itertools
import random
import re
import unicodedata
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ...errors import InputError

if TYPE_CHECKING:
    import networkx as nx

Equivalence = Literal["always", "context"]

_ARTICLE = re.compile(r"^(the|a|an)\s+", re.IGNORECASE)
_NON_WORD = re.compile(r"[^\w\s]")


def normalize_entity(name: str) -> str:
    """Exact-match key: NFKC, lower case, no leading article, no punctuation, single spaces."""
    text = unicodedata.normalize("NFKC", name).strip().lower()
    text = _NON_WORD.sub(" ", text)
    text = " ".join(text.split())
    return _ARTICLE.sub("", text).strip()


@dataclass(frozen=True, slots=True)
class Triple:
    """(subject | relation | object) extracted from one sentence/claim ``sentence_id``."""

    subject: str
    relation: str
    object: str
    sentence_id: str

    def to_dict(self) -> dict[str, str]:
        return {
            "subject": self.subject,
            "relation": self.relation,
            "object": self.object,
            "sentence_id": self.sentence_id,
        }


@dataclass(frozen=True, slots=True)
class EdgeLink:
    """One edge of a path: the triple behind it and whether it exists only by equivalence."""

    source: str
    target: str
    triple: Triple
    mirrored: bool
    merged_join: bool = False

    @property
    def via_equivalence(self) -> bool:
        return self.mirrored or self.merged_join


@dataclass(frozen=True, slots=True)
class Path:
    """A path of ``hops`` edges through the graph; ``nodes`` are node keys."""

    nodes: tuple[str, ...]
    links: tuple[EdgeLink, ...]

    @property
    def hops(self) -> int:
        return len(self.links)

    @property
    def start(self) -> str:
        return self.nodes[0]

    @property
    def end(self) -> str:
        return self.nodes[-1]


@dataclass(slots=True)
class KnowledgeGraph:
    """A directed entity graph built from triples (networkx ``DiGraph`` underneath)."""

    graph: nx.DiGraph
    names: dict[str, str] = field(default_factory=dict)
    aliases: dict[str, set[str]] = field(default_factory=dict)
    merged_into: dict[str, str] = field(default_factory=dict)

    # ---------------------------------------------------------------- building

    @classmethod
    def from_triples(cls, triples: Iterable[Triple]) -> KnowledgeGraph:
        """Exact-match merge of entities; self-loops and empty names are dropped."""
        import networkx as nx

        kg = cls(graph=nx.DiGraph())
        for triple in triples:
            kg.add_triple(triple)
        return kg

    def add_triple(self, triple: Triple, *, mirrored: bool = False) -> bool:
        """Add one triple; returns False when it was dropped (empty or self-loop)."""
        s, o = self.key(triple.subject), self.key(triple.object)
        if not s or not o or s == o or not triple.relation.strip():
            return False
        for key, surface in ((s, triple.subject), (o, triple.object)):
            if key not in self.graph:
                self.graph.add_node(key)
                self.names[key] = surface.strip()
            self.aliases.setdefault(key, set()).add(surface.strip())
        self._add_edge(s, o, triple, mirrored=mirrored)
        return True

    def _add_edge(self, s: str, o: str, triple: Triple, *, mirrored: bool) -> None:
        if self.graph.has_edge(s, o):
            data = self.graph.edges[s, o]
            if triple not in data["triples"]:
                data["triples"].append(triple)
            data["mirrored"] = data["mirrored"] and mirrored
        else:
            self.graph.add_edge(s, o, triples=[triple], mirrored=mirrored)

    def key(self, name: str) -> str:
        """The node key of an entity name (following canonical merges)."""
        key = normalize_entity(name)
        while key in self.merged_into:
            key = self.merged_into[key]
        return key

    # ---------------------------------------------------------------- equivalence

    def merge(self, names: Sequence[str]) -> str | None:
        """Merge ``always`` equivalent entities into one canonical node; returns its key.

        Names that are not in the graph are ignored; with fewer than two present nothing
        changes (None). Edges that would become self-loops are dropped.
        """
        keys = sorted({self.key(n) for n in names if self.key(n) in self.graph})
        if len(keys) < 2:
            return None
        canonical = min(keys, key=lambda k: (-self.graph.degree(k), len(k), k))
        for other in keys:
            if other == canonical:
                continue
            for _, target, data in list(self.graph.out_edges(other, data=True)):
                if target != canonical:
                    for triple in data["triples"]:
                        self._add_edge(canonical, target, triple, mirrored=data["mirrored"])
            for source, _, data in list(self.graph.in_edges(other, data=True)):
                if source != canonical:
                    for triple in data["triples"]:
                        self._add_edge(source, canonical, triple, mirrored=data["mirrored"])
            self.graph.remove_node(other)
            self.aliases.setdefault(canonical, set()).update(self.aliases.pop(other, set()))
            self.names.pop(other, None)
            self.merged_into[other] = canonical
        return canonical

    def mirror(self, names: Sequence[str], *, within: Collection[str]) -> int:
        """Mirror the edges of ``context`` equivalent entities inside one claim cluster;
        returns the edges added.

        ``within`` holds the ids of the cluster's claims (the ``sentence_id`` of their
        triples): the context in which the LLM judged the names equivalent. For members
        a ≠ b, every triple of an edge a → x (x ≠ b) that was extracted from a claim in
        ``within`` is copied onto b → x, and likewise x → a onto x → b, marked ``mirrored``
        (an existing extracted edge stays unmarked). Triples from other claims, and triples
        that are themselves mirror copies, are not copied: an equivalence holds only in the
        context where it was judged.
        """
        keys = sorted({self.key(n) for n in names if self.key(n) in self.graph})
        if len(keys) < 2:
            return 0
        scope = set(within)
        snapshot = {
            k: (
                self._cluster_triples(self.graph.out_edges(k, data=True), scope),
                self._cluster_triples(self.graph.in_edges(k, data=True), scope),
            )
            for k in keys
        }
        added = 0
        for a in keys:
            outs, ins = snapshot[a]
            for b in keys:
                if a == b:
                    continue
                for (_, target), triples in outs.items():
                    if target != b:
                        added += self._mirror_edge(b, target, triples)
                for (source, _), triples in ins.items():
                    if source != b:
                        added += self._mirror_edge(source, b, triples)
        return added

    def _cluster_triples(
        self, edges: Iterable[tuple[str, str, dict[str, Any]]], scope: set[str]
    ) -> dict[tuple[str, str], list[Triple]]:
        """The extracted (not mirrored) triples of ``edges`` whose claim is in ``scope``."""
        out: dict[tuple[str, str], list[Triple]] = {}
        for s, o, data in edges:
            found = [
                t
                for t in data["triples"]
                if t.sentence_id in scope and self.key(t.subject) == s and self.key(t.object) == o
            ]
            if found:
                out[s, o] = found
        return out

    def _mirror_edge(self, s: str, o: str, triples: Sequence[Triple]) -> int:
        """Add ``triples`` to edge s → o as mirror copies; 1 if the edge is new."""
        new = int(not self.graph.has_edge(s, o))
        for triple in triples:
            self._add_edge(s, o, triple, mirrored=True)
        return new

    def apply_equivalence(
        self, names: Sequence[str], kind: Equivalence, *, within: Collection[str] | None = None
    ) -> int:
        """``always`` → :meth:`merge` (graph-wide), ``context`` → :meth:`mirror` inside the
        cluster whose claim ids are ``within`` (required for ``context``); returns 1/edges
        changed."""
        if kind == "always":
            return 1 if self.merge(names) is not None else 0
        if kind == "context":
            if within is None:
                raise InputError("a 'context' equivalence needs its cluster's claim ids (within=)")
            return self.mirror(names, within=within)
        raise InputError(f"unknown equivalence kind {kind!r}; use 'always' or 'context'")

    # ---------------------------------------------------------------- paths

    def link(self, source: str, target: str, previous: EdgeLink | None = None) -> EdgeLink:
        """The :class:`EdgeLink` for edge source → target (its first triple).

        ``merged_join`` is set when the previous link's object and this link's subject are
        different surface names of the joint entity (the join exists only because of a
        canonical merge or normalisation).
        """
        data = self.graph.edges[source, target]
        triple: Triple = data["triples"][0]
        merged = False
        if previous is not None:
            merged = normalize_entity(previous.triple.object) != normalize_entity(triple.subject)
            merged = merged and not data["mirrored"] and not previous.mirrored
        return EdgeLink(
            source=source,
            target=target,
            triple=triple,
            mirrored=bool(data["mirrored"]),
            merged_join=merged,
        )

    def path(self, nodes: Sequence[str]) -> Path:
        links: list[EdgeLink] = []
        for s, t in itertools.pairwise(nodes):
            links.append(self.link(s, t, links[-1] if links else None))
        return Path(nodes=tuple(nodes), links=tuple(links))

    def shortest_paths(self, *, min_hops: int = 2, max_hops: int = 5) -> list[Path]:
        """One shortest directed path per ordered (start, end) pair with start ≠ end and
        ``min_hops`` ≤ length ≤ ``max_hops`` (deterministic: the lexicographically smallest of
        the pair's shortest paths). Shortest paths never repeat a node."""
        import networkx as nx

        if min_hops < 1 or max_hops < min_hops:
            raise InputError(f"bad hop range {min_hops}..{max_hops}")
        paths: list[Path] = []
        for source in sorted(self.graph.nodes):
            lengths = nx.single_source_shortest_path_length(self.graph, source, cutoff=max_hops)
            for target in sorted(lengths):
                dist = lengths[target]
                if target == source or dist < min_hops:
                    continue
                best = min(nx.all_shortest_paths(self.graph, source, target))
                paths.append(self.path(best))
        return dedupe_paths(paths)

    def name(self, key: str) -> str:
        return self.names.get(key, key)

    def stats(self) -> dict[str, Any]:
        mirrored = sum(1 for *_, d in self.graph.edges(data=True) if d["mirrored"])
        return {
            "nodes": self.graph.number_of_nodes(),
            "edges": self.graph.number_of_edges(),
            "mirrored_edges": mirrored,
            "merged_entities": len(self.merged_into),
        }


def dedupe_paths(paths: Iterable[Path]) -> list[Path]:
    """Drop paths whose start equals their end and keep one path per (start, end) pair
    (the first seen)."""
    seen: set[tuple[str, str]] = set()
    out: list[Path] = []
    for path in paths:
        if path.start == path.end:
            continue
        key = (path.start, path.end)
        if key in seen:
            continue
        seen.add(key)
        out.append(path)
    return out


def sample_paths(
    paths: Sequence[Path], per_hop: int, *, seed: int = 0, hop_range: tuple[int, int] = (2, 5)
) -> list[Path]:
    """Up to ``per_hop`` paths of every hop count in ``hop_range``, drawn with ``seed``.

    Paths whose edges come from more than one sentence are drawn first (a "multi-hop"
    question over one sentence is not multi-hop), then the rest. This preference is ours: the
    paper samples per hop count without it.
    """
    rng = random.Random(seed)
    out: list[Path] = []
    for hops in range(hop_range[0], hop_range[1] + 1):
        group = [p for p in paths if p.hops == hops]
        spread = [p for p in group if len({lk.triple.sentence_id for lk in p.links}) > 1]
        rest = [p for p in group if p not in spread]
        rng.shuffle(spread)
        rng.shuffle(rest)
        out.extend((spread + rest)[:per_hop])
    return out
